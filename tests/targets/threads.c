/* Four threads named "t-0".."t-3", each calling tagged(thread, k) for k = 0..2999 once CONTROL_DIR/go
 * exists (usage: threads CONTROL_DIR); prints "threads done" when all have finished, then waits for
 * CONTROL_DIR/quit. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "control.h"

#define THREADS 4
#define CALLS 3000


__attribute__((noinline)) int tagged(int thread, int k) { return thread * 100000 + k; }

static void *run(void *arg) {
    long id = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "t-%ld", id);
    pthread_setname_np(pthread_self(), name);
    while (!exists("go")) usleep(1000);
    for (int k = 0; k < CALLS; k++) tagged((int)id, k);
    return NULL;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, run, (void *)t);
    printf("ready\n");
    fflush(stdout);
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    printf("threads done\n");
    fflush(stdout);
    while (!exists("quit")) usleep(5000);
    return 0;
}
