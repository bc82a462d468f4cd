/* holdme BOARD: three worker threads that each count loops of a 1 ms nanosleep, for the thread-hold tests
 * (tests/instrument/test_thread_stops.py).
 *
 * Everything the test reads is in BOARD, a file of 14 longs the program maps shared (the test reads it with plain
 * reads): [0] workers started, [1..3] their tids, [4..6] their loop counts, [7..9] signals each worker's handler
 * ran for (SIGUSR1 and SIGRTMIN+1, sent to that thread with tgkill), [10..12] spurious EINTRs: a nanosleep that
 * failed with EINTR while no handler ran on that thread, which a hold must never cause. [13] the main thread's
 * handled signals (a process-directed signal may land there). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
enum { READY = 0, TID = 1, COUNT = 4, HANDLED = 7, SPURIOUS = 10, MAIN_HANDLED = 13, SLOTS = 14 };

static volatile long *board;
static __thread int slot = MAIN_HANDLED;  /* where this thread's handler counts */

static void on_signal(int sig) {
    (void)sig;
    __atomic_add_fetch(&board[slot], 1, __ATOMIC_SEQ_CST);
}

static void *work(void *arg) {
    long index = (long)arg;
    slot = HANDLED + (int)index;
    board[TID + index] = gettid();
    __atomic_add_fetch(&board[READY], 1, __ATOMIC_SEQ_CST);
    struct timespec nap = {0, 1000000};
    for (;;) {
        long handled = __atomic_load_n(&board[slot], __ATOMIC_SEQ_CST);
        if (nanosleep(&nap, NULL) == -1 && errno == EINTR && __atomic_load_n(&board[slot], __ATOMIC_SEQ_CST) == handled)
            __atomic_add_fetch(&board[SPURIOUS + index], 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&board[COUNT + index], 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: holdme BOARD\n");
        return 2;
    }
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, SLOTS * sizeof(long)) != 0) {
        perror("holdme: board");
        return 1;
    }
    board = mmap(NULL, SLOTS * sizeof(long), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (board == MAP_FAILED) {
        perror("holdme: mmap");
        return 1;
    }
    struct sigaction action = {0};
    action.sa_handler = on_signal;  /* no SA_RESTART: a handler run shows as EINTR, which is not spurious */
    sigaction(SIGUSR1, &action, NULL);
    sigaction(SIGRTMIN + 1, &action, NULL);
    pthread_t threads[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&threads[i], NULL, work, (void *)i);
    for (;;)
        pause();
}
