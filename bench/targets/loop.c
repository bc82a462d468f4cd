/* Benchmark target: usage loop CALLS REPS [GO_FILE|-] [DELAY_MS]
 * Waits for GO_FILE (when given, "-" for none) and DELAY_MS (for tracers that hook asynchronously), then runs
 * REPS timed loops of CALLS calls to work(), printing "loop <rep> <wall ns> <thread cpu ns>" after each and
 * pausing 300 ms between loops (so a tracer can drain), then "done". The thread's CPU time is what the loop
 * itself spent, tracer hooks included; wall time also counts the time the loop waited for a CPU while the
 * tracer's other threads and processes (draining, storing) ran. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) long work(long a, long b) { return a + b; }

static long long now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 100000;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (argc > 3 && argv[3][0] != '-') {
        struct stat st;
        printf("ready\n");
        fflush(stdout);
        while (stat(argv[3], &st) != 0) usleep(2000);
    }
    if (argc > 4) usleep((useconds_t)atoi(argv[4]) * 1000);
    volatile long sum = 0;
    for (int r = 0; r < reps; r++) {
        long long c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        long long t0 = now_ns(CLOCK_MONOTONIC);
        for (long i = 0; i < calls; i++) sum = work(sum, i);
        long long t1 = now_ns(CLOCK_MONOTONIC);
        long long c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        printf("loop %d %lld %lld\n", r, t1 - t0, c1 - c0);
        fflush(stdout);
        usleep(300000);
    }
    printf("done\n");
    fflush(stdout);
    return 0;
}
