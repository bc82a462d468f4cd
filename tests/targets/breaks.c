/* Breakpoint target (usage: breaks CONTROL_DIR). Thread "w-steady" prints "tick N" every 5 ms until CONTROL_DIR/quit
 * exists; thread "w-orders" waits for CONTROL_DIR/go, then calls process_order(id, id * 50) for id = 1..5 (each adds
 * its quantity to g_total and, through add_to, to g_account's total) and prints "orders done". main prints "ready"
 * once both run and exits when both have finished. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include "control.h"

int g_total = 0;
const int g_limit = 1000;

struct account {
    int id;
    long total;
    const char *owner;
};
struct account g_account = {7, 0, "ada"};

__attribute__((noinline)) long add_to(struct account *acc, int n) {
    long before = acc->total;
    acc->total = before + n;
    return acc->total;
}

__attribute__((noinline)) int process_order(int id, int qty) {
    if (qty > g_limit) return -1;
    g_total += qty;
    add_to(&g_account, qty);
    printf("order %d qty %d total %d\n", id, qty, g_total);
    fflush(stdout);
    return g_total;
}

static void *orders(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "w-orders");
    while (!exists("go")) usleep(1000);
    for (int id = 1; id <= 5; id++) {
        process_order(id, id * 50);
    }
    printf("orders done\n");
    fflush(stdout);
    return NULL;
}

static void *steady(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "w-steady");
    for (int n = 0; !exists("quit"); n++) {
        printf("tick %d\n", n);
        fflush(stdout);
        usleep(5000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    pthread_t a, b;
    pthread_create(&a, NULL, orders, NULL);
    pthread_create(&b, NULL, steady, NULL);
    printf("ready\n");
    fflush(stdout);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    return 0;
}
