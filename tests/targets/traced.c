/* A target for function tracing. Usage: traced CONTROL_DIR
 * Runs one round of work each time CONTROL_DIR/round-N appears (N = 1, 2, ...), printing "round N done";
 * exits when CONTROL_DIR/quit appears. Calls per round:
 *   process_command("go", 5) once -> add(i, helper_static(i)) for i in 0..4, helper_static 5 times
 *   multiply(6, 7) once, slow_function() once (>= 20 ms), validate(5) -> 0, validate(50) -> 1
 *   two threads named "worker-1"/"worker-2", each calling add(100 + id, id) five times
 * early_setup(7) runs in a constructor and init_config(42) first thing in main. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "control.h"


__attribute__((noinline)) int early_setup(int level) { return level + 1; }
__attribute__((noinline)) int init_config(int value) { return value * 2; }
__attribute__((noinline)) int add(int a, int b) { return a + b; }
__attribute__((noinline)) long multiply(long a, long b) { return a * b; }
__attribute__((noinline)) static int helper_static(int x) { return x * 3; }
__attribute__((noinline)) int validate(int value) { return value > 10; }
__attribute__((noinline)) void slow_function(void) { usleep(20000); }

__attribute__((noinline)) int process_command(const char *cmd, int n) {
    int sum = (int)strlen(cmd);
    for (int i = 0; i < n; i++) sum += add(i, helper_static(i));
    return sum;
}

static void *worker(void *arg) {
    long id = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%ld", id);
    pthread_setname_np(pthread_self(), name);
    for (int i = 0; i < 5; i++) add(100 + (int)id, (int)id);
    return NULL;
}

__attribute__((constructor)) static void before_main(void) { early_setup(7); }

int main(int argc, char **argv) {
    init_config(42);
    control = argc > 1 ? argv[1] : ".";
    printf("ready\n");
    fflush(stdout);
    for (int round = 1;; round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!exists(name)) {
            if (exists("quit")) return 0;
            usleep(5000);
        }
        process_command("go", 5);
        multiply(6, 7);
        slow_function();
        validate(5);
        validate(50);
        pthread_t threads[2];
        for (long t = 0; t < 2; t++) pthread_create(&threads[t], NULL, worker, (void *)(t + 1));
        for (int t = 0; t < 2; t++) pthread_join(threads[t], NULL);
        printf("round %d done\n", round);
        fflush(stdout);
    }
}
