/* Two threads take the same two locks in opposite orders. A barrier makes sure each holds its first lock
 * before asking for the second, so they always deadlock; main waits for them in pthread_join. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t accounts_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold_one;

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

int main(void) {
    pthread_t transfer, audit;
    pthread_barrier_init(&both_hold_one, NULL, 2);
    printf("test bank::transfer ... starting\n");
    fflush(stdout);
    pthread_create(&transfer, NULL, transfer_funds, NULL);
    pthread_create(&audit, NULL, audit_ledger, NULL);
    pthread_setname_np(transfer, "transfer");
    pthread_setname_np(audit, "audit");
    pthread_join(transfer, NULL);
    pthread_join(audit, NULL);
    printf("never reached\n");
    return 0;
}
