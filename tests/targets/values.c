/* Arguments and return values beyond the integer registers (System V x86-64): doubles and floats in xmm
 * registers, arguments past the sixth and structs passed in memory on the stack, a long double, structs
 * returned in xmm registers and in rax + xmm0. Prints "ready", then runs one round of calls per file
 * "round-N" in the control directory (argv[1]), always with the same values, and prints "round N done";
 * with a second argument "once", runs one round at once and exits (for gdb).
 * tests/e2e/test_values.py compares what Strobe shows with what gdb shows for the same calls. */
#include <stdio.h>
#include <unistd.h>
#include "control.h"

struct vec3 { double x, y, z; };               /* 24 bytes: in memory (on the stack) */
struct point { float x, y; };                  /* one xmm register */
struct span { long start; double weight; };    /* rax + xmm0 when returned */
struct wide { long a, b, c, d, e; };           /* 40 bytes: on the stack */

__attribute__((noinline)) double scale(double x, float f, int n) { return x * f + n; }
__attribute__((noinline)) long eight(long a, long b, long c, long d, long e, long f, long g, long h) {
    return a + b + c + d + e + f + g + h;
}
__attribute__((noinline)) double length2(struct vec3 v, int tag) { return v.x * v.x + v.y * v.y + v.z * v.z + tag; }
__attribute__((noinline)) float dot(struct point a, struct point b) { return a.x * b.x + a.y * b.y; }
__attribute__((noinline)) struct span make_span(long start, double weight) {
    struct span s = {start, weight};
    return s;
}
__attribute__((noinline)) struct point halve(struct point p) {
    struct point h = {p.x / 2, p.y / 2};
    return h;
}
__attribute__((noinline)) long sum_wide(struct wide w, long extra) { return w.a + w.b + w.c + w.d + w.e + extra; }
__attribute__((noinline)) long double grow(long double x, int by) { return x * by; }
__attribute__((noinline)) double mixed(int a, double b, long c, float d, double e, long f, double g, long h,
                                        long i, double j) {
    return a + b + c + d + e + f + g + h + i + j;
}

int main(int argc, char **argv) {
    if (argc > 1) control = argv[1];
    int once = argc > 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    double total = 0;
    for (int round = 1; round <= (once ? 1 : 1000); round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!once && !exists(name)) usleep(2000);
        struct vec3 v = {1.5, -2.25, 3.0};
        struct point a = {0.5f, 4.0f}, b = {2.0f, -1.5f};
        struct wide w = {10, 20, 30, 40, 50};
        total += scale(2.5, 0.75f, -3);
        total += eight(1, 2, 3, 4, 5, 6, 70, 80);
        total += length2(v, 9);
        total += dot(a, b);
        total += make_span(-12, 0.125).weight;
        total += halve(b).y;
        total += sum_wide(w, 6);
        total += (double)grow(1.25L, 3);
        total += mixed(1, 2.5, 3, 4.5f, 5.25, 6, 7.75, 8, 9, 10.5);
        printf("round %d done\n", round);
    }
    printf("%f\n", total);
    return 0;
}
