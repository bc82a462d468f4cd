/* Benchmark target: usage rate CALLS_PER_SECOND SECONDS GO_FILE
 * After GO_FILE appears, calls paced() at a steady rate for SECONDS, then prints "done <calls>". */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) long paced(long a, long b) { return a ^ b; }

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long rate = argc > 1 ? atol(argv[1]) : 125000;
    double seconds = argc > 2 ? atof(argv[2]) : 10.0;
    struct stat st;
    printf("ready\n");
    fflush(stdout);
    while (argc > 3 && stat(argv[3], &st) != 0) usleep(2000);
    long long start = now_ns(), end = start + (long long)(seconds * 1e9);
    long calls = 0;
    volatile long sum = 0;
    for (;;) {
        long long t = now_ns();
        if (t >= end) break;
        long due = (long)((double)(t - start) * rate / 1e9);
        while (calls < due) sum = paced(sum, calls++);
        if (calls >= due) usleep(200);
    }
    printf("done %ld\n", calls);
    fflush(stdout);
    return 0;
}
