/* A program whose debug info the tests move into a separate file (objcopy --only-keep-debug) before stripping it.
 *
 *   debugfile MODE CONTROL_DIR
 *
 * Prints "ready", waits for CONTROL_DIR/go, calls measure() three times and prints "done"; then MODE "crash"
 * writes through a null pointer in crash_here(), MODE "wait" waits for CONTROL_DIR/end and exits 0. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct box {
    int width;
    int height;
};

int g_level = 7;
static long s_total = 0;

static void wait_for(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    while (access(path, F_OK) != 0)
        usleep(10000);
}

long measure(struct box *box, int scale, const char *label) {
    long area = (long)box->width * box->height * scale;
    s_total += area + (long)strlen(label);
    return area;
}

void crash_here(int *target, int value) {
    *target = value + g_level;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: debugfile crash|wait CONTROL_DIR\n");
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    wait_for(argv[2], "go");
    for (int i = 1; i <= 3; i++) {
        struct box box = {i, i + 1};
        measure(&box, 10 * i, "box");
    }
    printf("done %ld\n", s_total);
    fflush(stdout);
    if (strcmp(argv[1], "crash") == 0)
        crash_here((int *)0, 5);
    wait_for(argv[2], "end");
    return 0;
}
