/* A program that gets stuck on purpose, for debug_stacks: `stuck_modes deadlock` has two threads take two mutexes
 * in opposite orders (a barrier makes sure each holds its first before asking for the second, so they always
 * deadlock) while main waits in pthread_join; `stuck_modes spin` has a worker spin on a full core in spin_forever.
 * Both print "ready" once stuck (or about to be). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t accounts_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold_one;
static volatile unsigned long spins;

static void *transfer_funds(void *arg) {
    pthread_mutex_lock(&accounts_lock);
    pthread_barrier_wait(&both_hold_one);
    pthread_mutex_lock(&ledger_lock);
    pthread_mutex_unlock(&ledger_lock);
    pthread_mutex_unlock(&accounts_lock);
    return arg;
}

static void *audit_ledger(void *arg) {
    pthread_mutex_lock(&ledger_lock);
    pthread_barrier_wait(&both_hold_one);
    pthread_mutex_lock(&accounts_lock);
    pthread_mutex_unlock(&accounts_lock);
    pthread_mutex_unlock(&ledger_lock);
    return arg;
}

static unsigned long spin_forever(unsigned long seed) {
    unsigned long x = seed;
    for (;;) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        spins = x;
    }
    return x;
}

static void *spinner(void *arg) {
    return (void *)spin_forever((unsigned long)arg);
}

int main(int argc, char **argv) {
    pthread_t first, second;
    if (argc > 1 && strcmp(argv[1], "spin") == 0) {
        pthread_create(&first, NULL, spinner, (void *)7UL);
        pthread_setname_np(first, "spinner");
        printf("ready\n");
        fflush(stdout);
        pthread_join(first, NULL);
        return 0;
    }
    pthread_barrier_init(&both_hold_one, NULL, 2);
    pthread_create(&first, NULL, transfer_funds, NULL);
    pthread_create(&second, NULL, audit_ledger, NULL);
    pthread_setname_np(first, "transfer");
    pthread_setname_np(second, "audit");
    printf("ready\n");
    fflush(stdout);
    pthread_join(first, NULL);
    pthread_join(second, NULL);
    printf("never reached\n");
    return 0;
}
