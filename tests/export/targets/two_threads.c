/* debug_export's e2e target (usage: two_threads CONTROL_DIR): the main thread and a thread named "worker" each run
 * outer() -> inner() -> leaf() nested calls once CONTROL_DIR/go exists, the main thread first; each prints its
 * result. The worker then waits for CONTROL_DIR/crash and writes through a null pointer in crash_now(). `counter`
 * counts leaf() calls (a global to poll). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *control = ".";
volatile long counter = 0;
static volatile int main_done = 0;

static int exists(const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", control, name);
    return stat(path, &st) == 0;
}

__attribute__((noinline)) int leaf(int x) { counter++; return x * 2; }
__attribute__((noinline)) int inner(int x) { return leaf(x) + leaf(x + 1); }
__attribute__((noinline)) int outer(int n) {
    int sum = 0;
    for (int i = 0; i < n; i++) sum += inner(i);
    return sum;
}
__attribute__((noinline)) void crash_now(int *where) { *where = 42; }

static void *worker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "worker");
    while (!main_done) usleep(1000);
    printf("worker: %d\n", outer(3));
    fflush(stdout);
    while (!exists("crash")) usleep(1000);
    crash_now(NULL);
    return NULL;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    pthread_t thread;
    pthread_create(&thread, NULL, worker, NULL);
    printf("ready\n");
    fflush(stdout);
    while (!exists("go")) usleep(1000);
    printf("main: %d\n", outer(2));
    fflush(stdout);
    main_done = 1;
    pthread_join(thread, NULL);
    return 0;
}
