/* Benchmark target: usage threads THREADS CALLS_PER_SECOND SECONDS GO_FILE [STOP_FILE]
 * Prints "ready", waits for GO_FILE ("-": none), then THREADS threads (named "pacer-<i>") each call paced() at
 * CALLS_PER_SECOND / THREADS calls per second for SECONDS, or until STOP_FILE appears (checked every 20 ms);
 * prints "done <calls of all threads>". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256

__attribute__((noinline)) long paced(long a, long b) { return a ^ b; }

static double per_thread_rate, seconds;
static long calls_of[MAX_THREADS];
static int stop, finished;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *pace(void *arg) {
    long index = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "pacer-%ld", index);
    pthread_setname_np(pthread_self(), name);
    long long start = now_ns(), end = start + (long long)(seconds * 1e9);
    long calls = 0;
    volatile long sum = 0;
    for (;;) {
        long long t = now_ns();
        if (t >= end || __atomic_load_n(&stop, __ATOMIC_RELAXED)) break;
        long due = (long)((double)(t - start) * per_thread_rate / 1e9);
        while (calls < due) sum = paced(sum, calls++);
        usleep(200);
    }
    calls_of[index] = calls;
    __atomic_add_fetch(&finished, 1, __ATOMIC_RELEASE);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    double rate = argc > 2 ? atof(argv[2]) : 125000;
    seconds = argc > 3 ? atof(argv[3]) : 10.0;
    if (threads < 1 || threads > MAX_THREADS) {
        fprintf(stderr, "threads: 1 to %d\n", MAX_THREADS);
        return 2;
    }
    per_thread_rate = rate / threads;
    struct stat st;
    printf("ready\n");
    fflush(stdout);
    while (argc > 4 && argv[4][0] != '-' && stat(argv[4], &st) != 0) usleep(2000);
    pthread_t ids[MAX_THREADS];
    for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, pace, (void *)i);
    while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < threads) {
        if (argc > 5 && argv[5][0] != '-' && stat(argv[5], &st) == 0) __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
        usleep(20000);
    }
    long total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ids[i], NULL);
        total += calls_of[i];
    }
    printf("done %ld\n", total);
    fflush(stdout);
    return 0;
}
