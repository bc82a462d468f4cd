/* Functions whose parameters and return values cover the System V x86-64 calling convention: integer
 * scalars of every size and sign, bool, char, enum, pointers, floating point (in xmm registers), small and
 * big structs by value, bitfields, packed structs, more than six integer parameters, a variadic function.
 * main calls each once with the values tests/daemon/test_signatures.py expects to see in the registers. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

enum color { RED, GREEN = 5, BLUE = -1 };

struct pair { int a; int b; };                         /* 8 bytes: one integer register */
struct tagged { long id; unsigned short code; char tag; }; /* 16 bytes: two integer registers */
struct mixed { long id; double weight; };              /* INTEGER + SSE: one integer, one xmm register */
struct floats { float x; float y; };                   /* SSE only: one xmm register */
struct big { long v[4]; };                             /* 32 bytes: in memory */
struct __attribute__((packed)) packed { char c; int i; }; /* a misaligned field: in memory */
struct flags { unsigned ready : 1; unsigned count : 3; int level : 4; };
struct nested { struct pair p; short s; };             /* 12 bytes: two integer registers */

__attribute__((noinline)) int scalars(int i, unsigned u, short s, char c, bool b, enum color col) {
    return i + (int)u + s + c + b + col;
}
__attribute__((noinline)) long widths(signed char sc, unsigned short us, long long ll, unsigned long ul) {
    return sc + us + ll + (long)ul;
}
__attribute__((noinline)) int pointers(int *p, const char *name, int *none) { return (p != 0) + name[0] + (none != 0); }
__attribute__((noinline)) long floating(int a, double d, long b, float f, unsigned char c) {
    return a + (long)d + b + (long)f + c;
}
__attribute__((noinline)) long by_pair(struct pair p, long after) { return p.a + p.b + after; }
__attribute__((noinline)) long by_tagged(struct tagged t, int after) { return t.id + t.code + t.tag + after; }
__attribute__((noinline)) long by_mixed(struct mixed m, int after) { return m.id + (long)m.weight + after; }
__attribute__((noinline)) long by_floats(struct floats f, int after) { return (long)(f.x + f.y) + after; }
__attribute__((noinline)) long by_big(struct big b, int after) { return b.v[0] + b.v[3] + after; }
__attribute__((noinline)) long by_packed(struct packed k, int after) { return k.c + k.i + after; }
__attribute__((noinline)) int by_flags(struct flags f) { return (int)(f.ready + f.count) + f.level; }
__attribute__((noinline)) int by_nested(struct nested n, long after) { return n.p.a + n.p.b + n.s + (int)after; }
/* Eight integer parameters: the last two are on the stack. */
__attribute__((noinline)) long many(long a, long b, long c, long d, long e, long f, long g, long h) {
    return a + b + c + d + e + f + g + h;
}
/* t needs two registers when only one is left: it goes on the stack, and `last` takes that register. */
__attribute__((noinline)) long squeezed(long a, long b, long c, long d, long e, struct tagged t, long last) {
    return a + b + c + d + e + t.id + last;
}
__attribute__((noinline)) int sum(int count, ...) {
    va_list ap;
    va_start(ap, count);
    int total = 0;
    for (int i = 0; i < count; i++) total += va_arg(ap, int);
    va_end(ap);
    return total;
}
__attribute__((noinline)) void nothing(int x) { (void)x; }
__attribute__((noinline)) bool is_even(int x) { return x % 2 == 0; }
__attribute__((noinline)) enum color pick(int which) { return which == 0 ? RED : which == 1 ? GREEN : BLUE; }
__attribute__((noinline)) int negative(int x) { return -x; }
__attribute__((noinline)) unsigned char low_byte(unsigned value) { return (unsigned char)value; }
__attribute__((noinline)) char letter(int i) { return (char)('a' + i); }
__attribute__((noinline)) const char *greeting(void) { return "hello"; }
__attribute__((noinline)) int *nowhere(void) { return 0; }
__attribute__((noinline)) double half(int x) { return x / 2.0; }
__attribute__((noinline)) struct pair make_pair(int a, int b) { struct pair p = {a, b}; return p; }
__attribute__((noinline)) struct mixed make_mixed(long id) { struct mixed m = {id, 0.5}; return m; }
__attribute__((noinline)) struct big make_big(int seed) { struct big b = {{seed, seed, seed, seed}}; return b; }
__attribute__((noinline)) long double extended(long double x, int after) { return x + after; }
__attribute__((noinline)) __int128 wide(__int128 v, int after) { return v + after; }

int main(void) {
    int value = 7;
    struct pair p = {-3, 4};
    struct tagged t = {1L << 40, 65535, 'z'};
    struct mixed m = {-9, 2.5};
    struct floats f = {1.5f, 2.5f};
    struct big b = {{1, 2, 3, 4}};
    struct packed k = {'k', 77};
    struct flags fl = {1, 5, -3};
    struct nested n = {{10, -20}, -30};
    long total = 0;
    total += scalars(-1, 4000000000u, -2, 'x', true, BLUE);
    total += widths(-7, 65000, -(1LL << 50), 18000000000000000000ul);
    total += pointers(&value, "hello", 0);
    total += floating(-5, 1.25, 1L << 40, 2.5f, 200);
    total += by_pair(p, -6);
    total += by_tagged(t, 8);
    total += by_mixed(m, 9);
    total += by_floats(f, 10);
    total += by_big(b, 11);
    total += by_packed(k, 12);
    total += by_flags(fl);
    total += by_nested(n, 13);
    total += many(1, 2, 3, 4, 5, 6, 7, 8);
    total += squeezed(1, 2, 3, 4, 5, t, 14);
    total += sum(3, 10, 20, 30);
    nothing(15);
    total += is_even(4) + pick(2) + negative(16) + low_byte(0x1ff) + letter(2) + (greeting() != 0);
    total += (nowhere() == 0) + (long)half(17) + make_pair(18, 19).a + make_mixed(20).id + make_big(21).v[2];
    total += (long)extended(1.5L, 22) + (long)wide((__int128)1 << 70, 23);
    printf("%ld\n", total);
    return 0;
}
