/* A target for pointer arguments followed at call time. Usage: follow CONTROL_DIR
 * Prints "ready", then runs one round each time CONTROL_DIR/round-N appears (printing "round N done"); exits
 * when CONTROL_DIR/quit appears. Calls per round:
 *   walk(&a, "list")     a -> b -> c -> d, names "alpha".."delta", values 1..4; returns the sum (10)
 *   find(&a, 3)          returns &c
 *   spin(&r1)            r1 -> r2 -> r1 (a cycle of two)
 *   peek(BAD, 0)         BAD = (struct node *)0x10, never dereferenced by the program
 *   nest(&outer)         outer.mid.inner.x = 7, outer.tag = "deep"
 *   label("plain text")  a char* argument
 *   burst(&a) 3000 times in a row
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include "control.h"

struct node {
    int value;
    const char *name;
    struct node *next;
};

struct inner { int x; };
struct mid { struct inner inner; int y; };
struct outer { struct mid mid; const char *tag; };


__attribute__((noinline)) int walk(struct node *head, const char *what) {
    int sum = 0;
    for (struct node *n = head; n != NULL; n = n->next) sum += n->value;
    return sum + (what[0] == 0);
}

__attribute__((noinline)) struct node *find(struct node *head, int value) {
    for (struct node *n = head; n != NULL; n = n->next)
        if (n->value == value) return n;
    return NULL;
}

__attribute__((noinline)) int spin(struct node *ring) { return ring->value + ring->next->value; }
__attribute__((noinline)) int peek(struct node *maybe, int deref) { return deref ? maybe->value : -1; }
__attribute__((noinline)) int nest(struct outer *o) { return o->mid.inner.x + o->mid.y; }
__attribute__((noinline)) int label(const char *text) { return text[0]; }
__attribute__((noinline)) int burst(struct node *n) { return n->value; }

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    struct node d = {4, "delta", NULL}, c = {3, "gamma", &d}, b = {2, "beta", &c}, a = {1, "alpha", &b};
    struct node r1 = {10, "r1", NULL}, r2 = {20, "r2", &r1};
    r1.next = &r2;
    struct outer outer = {{{7}, 8}, "deep"};
    printf("ready\n");
    fflush(stdout);
    for (int round = 1;; round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!exists(name)) {
            if (exists("quit")) return 0;
            usleep(5000);
        }
        walk(&a, "list");
        find(&a, 3);
        spin(&r1);
        peek((struct node *)0x10, 0);
        nest(&outer);
        label("plain text");
        for (int i = 0; i < 3000; i++) burst(&a);
        printf("round %d done\n", round);
        fflush(stdout);
    }
}
