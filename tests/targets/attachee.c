/* A program started outside Strobe, which tests/e2e/test_attach.py attaches to by pid. It says "ready", then each
 * round-N file in the control directory (argv[1]) runs one round: three compute() calls, "round N done" and the
 * running total on stdout (printf, then writev), a line on stderr. A "crash" file makes it dereference NULL, a
 * "quit" file ends it with exit code 3. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "control.h"

int rounds_done = 0;
long total = 0;

int compute(int round, int step) {
    return round * 10 + step;
}

static void explode(void) {
    volatile int *nowhere = NULL;
    *nowhere = 1;
}

static void round_of(int n) {
    for (int step = 0; step < 3; step++) {
        total += compute(n, step);
    }
    rounds_done = n;
    printf("round %d done\n", n);
    fflush(stdout);
    char line[64];
    int length = snprintf(line, sizeof line, "total %ld\n", total);
    struct iovec parts[2] = {{"via writev: ", 12}, {line, (size_t)length}};
    writev(1, parts, 2);
    fprintf(stderr, "round %d err\n", n);
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    printf("ready\n");
    fflush(stdout);
    struct timespec nap = {0, 5 * 1000 * 1000};
    for (;;) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", rounds_done + 1);
        if (exists(name)) {
            round_of(rounds_done + 1);
        } else if (exists("crash")) {
            explode();
        } else if (exists("quit")) {
            exit(3);
        }
        nanosleep(&nap, NULL);
    }
}
