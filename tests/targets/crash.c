/* A target that crashes on purpose. Usage: crash MODE CONTROL_DIR
 * Prints "ready", waits for CONTROL_DIR/go, calls prepare(1..3), then, by MODE:
 *   null-worker  a thread named "crasher" writes through a NULL pointer in crash_worker()
 *   assert       check_value(7) fails assert(value == 3): abort()
 *   divide       divide(10, 0): an integer division by zero
 *   trap         trap_here(): __builtin_trap (an illegal instruction)
 *   own-handler  installs a SIGSEGV handler that prints "own handler ran" to stderr and _exit(3)s, then
 *                writes through a NULL pointer in crash_worker() on the main thread
 */
#define _GNU_SOURCE
#include <assert.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((noinline)) int prepare(int step) { return step * 2; }

__attribute__((noinline)) void crash_worker(int *target, int value) {
    int local_marker = 0x5eed;
    *target = value + local_marker;
}

__attribute__((noinline)) int check_value(int value) {
    assert(value == 3);
    return value;
}

__attribute__((noinline)) int divide(int a, int b) { return a / b; }

__attribute__((noinline)) void trap_here(void) { __builtin_trap(); }

static void *crasher(void *arg) {
    pthread_setname_np(pthread_self(), "crasher");
    crash_worker((int *)arg, 42);
    return NULL;
}

static void own_handler(int sig) {
    static const char message[] = "own handler ran\n";
    (void)sig;
    write(2, message, sizeof message - 1);
    _exit(3);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "null-worker";
    const char *control = argc > 2 ? argv[2] : ".";
    char go[4096];
    struct stat st;
    snprintf(go, sizeof go, "%s/go", control);
    printf("ready\n");
    fflush(stdout);
    while (stat(go, &st) != 0) usleep(2000);
    for (int i = 1; i <= 3; i++) prepare(i);
    if (strcmp(mode, "null-worker") == 0) {
        pthread_t thread;
        pthread_create(&thread, NULL, crasher, NULL);
        pthread_join(thread, NULL);
    } else if (strcmp(mode, "assert") == 0) {
        check_value(7);
    } else if (strcmp(mode, "divide") == 0) {
        printf("%d\n", divide(10, 0));
    } else if (strcmp(mode, "trap") == 0) {
        trap_here();
    } else if (strcmp(mode, "own-handler") == 0) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = own_handler;
        sigaction(SIGSEGV, &action, NULL);
        crash_worker(NULL, 1);
    }
    printf("not crashed\n");
    return 0;
}
