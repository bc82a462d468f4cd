/* Stepping target (usage: steps CONTROL_DIR). main prints "ready", waits for CONTROL_DIR/go, then runs work(4) on
 * thread "w-1" and work(5) on thread "w-2" at once; each prints "w-N result R" (work(4) = 16 + 25 + 6 = 47,
 * work(5) = 25 + 36 + 6 = 67). work() calls square() directly, then through a function pointer, then the
 * recursive fact(). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "control.h"

int g_calls = 0;

__attribute__((noinline)) int square(int x) {
    int y = x * x;
    g_calls++;
    return y;
}

__attribute__((noinline)) int fact(int n) {
    if (n <= 1) return 1;
    int below = fact(n - 1);
    return n * below;
}

static int (*volatile op)(int) = square;

__attribute__((noinline)) int work(int a) {
    int s = square(a);
    int t = op(a + 1);
    int f = fact(3);
    return s + t + f;
}

static void *worker(void *arg) {
    int a = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "w-%d", a - 3);
    pthread_setname_np(pthread_self(), name);
    int r = work(a);
    printf("%s result %d\n", name, r);
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    printf("ready\n");
    fflush(stdout);
    while (!exists("go")) usleep(1000);
    pthread_t one, two;
    pthread_create(&one, NULL, worker, (void *)4L);
    pthread_create(&two, NULL, worker, (void *)5L);
    pthread_join(one, NULL);
    pthread_join(two, NULL);
    return 0;
}
