/* A target for live memory reads. Usage: memory CONTROL_DIR
 * Prints "buffer 0x..." (the runtime address of g_buffer, filled with 0, 1, 2, ...), "ticks 0x..." (that of
 * g_ticks), then "ready".
 * Each time CONTROL_DIR/round-N appears: g_counter += 1, g_config.inner.pos.x += 10, prints "round N done".
 * A thread named "ticker" increments g_ticks and calls tick(g_ticks) every 20 ms.
 * Exits when CONTROL_DIR/quit appears. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "control.h"

struct Point { int x; int y; };
struct Inner { double ratio; struct Point pos; };
typedef struct Config {
    int id;
    const char *name;
    struct Inner inner;
    int limits[4];
    struct Config *next;
    unsigned char flags;
} Config;
enum Mode { MODE_IDLE = 0, MODE_RUN = 5 };

int g_counter = 42;
double g_tempo = 120.5;
static int s_hidden = 7;
Config g_second = {2, "second", {0.25, {3, 4}}, {5, 6, 7, 8}, NULL, 1};
Config g_config = {1, "primary", {1.5, {10, 20}}, {1, 2, 3, 4}, &g_second, 0x80};
Config *g_config_ptr = &g_config;
Config *g_null_ptr = NULL;
unsigned char g_buffer[256];
volatile long g_ticks = 0;
enum Mode g_mode = MODE_RUN;


__attribute__((noinline)) long tick(long n) { return n * 2 + s_hidden; }

static void *ticker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "ticker");
    for (;;) {
        g_ticks++;
        tick(g_ticks);
        usleep(20000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    for (int i = 0; i < 256; i++) g_buffer[i] = (unsigned char)i;
    pthread_t thread;
    pthread_create(&thread, NULL, ticker, NULL);
    printf("buffer %p\n", (void *)g_buffer);
    printf("ticks %p\n", (void *)&g_ticks);
    printf("ready\n");
    fflush(stdout);
    for (int round = 1;; round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!exists(name)) {
            if (exists("quit")) return 0;
            usleep(5000);
        }
        g_counter += 1;
        g_config.inner.pos.x += 10;
        printf("round %d done\n", round);
        fflush(stdout);
    }
}
