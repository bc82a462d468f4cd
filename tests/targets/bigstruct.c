/* A target whose traced calls carry big values, for events cut to query.maxEventBytes. Usage: bigstruct CONTROL_DIR
 * Prints "ready", then runs one round each time CONTROL_DIR/round-N appears (printing "round N done"); exits
 * when CONTROL_DIR/quit appears. Each round calls take(big) 20 times: `big` points to the first of a chain of 12
 * struct big (each with 30 int fields, two nested structs, a 999-char text and a pointer to the next one, the last
 * one's NULL), longer than the deepest serializationDepth. The global `big` holds the same pointer as the
 * parameter of the same name, so debug_read can name what an event shows of it: 'big->peer->f7'.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "control.h"

#define CHAIN 12

struct leaf {
    int id;
    double weight;
    char tag[24];
    struct leaf *next;
};

struct inner {
    int x, y, z;
    struct leaf *leaf;
};

struct big {
    int f00, f01, f02, f03, f04, f05, f06, f07, f08, f09;
    int f10, f11, f12, f13, f14, f15, f16, f17, f18, f19;
    int f20, f21, f22, f23, f24, f25, f26, f27, f28, f29;
    struct inner nested;
    struct inner more;
    char text[1000];
    struct big *peer;
};

struct big chain[CHAIN];
struct leaf leaves[2];
struct big *big;

__attribute__((noinline)) int take(struct big *big) {
    int sum = 0;
    for (struct big *b = big; b != NULL; b = b->peer) sum += b->f00 + b->nested.x;
    return sum;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    leaves[0] = (struct leaf){1, 0.5, "first leaf", &leaves[1]};
    leaves[1] = (struct leaf){2, 1.5, "second leaf", NULL};
    for (int i = 0; i < CHAIN; i++) {
        struct big *b = &chain[i];
        int *fields = &b->f00;
        for (int f = 0; f < 30; f++) fields[f] = 1000 * i + f;
        b->nested = (struct inner){i, i + 1, i + 2, i == 0 ? &leaves[0] : NULL};
        b->more = (struct inner){-i, -i - 1, -i - 2, NULL};
        for (int c = 0; c < 999; c++) b->text[c] = (char)('a' + (c + i) % 26);
        b->text[999] = 0;
        b->peer = i + 1 < CHAIN ? &chain[i + 1] : NULL;
    }
    big = &chain[0];
    printf("ready\n");
    fflush(stdout);
    for (int round = 1;; round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!exists(name)) {
            if (exists("quit")) return 0;
            usleep(5000);
        }
        for (int i = 0; i < 20; i++) take(big);
        printf("round %d done\n", round);
        fflush(stdout);
    }
}
