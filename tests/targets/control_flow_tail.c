/* Tail calls between traced functions (tests/e2e/test_trace_control_flow.py), built with -O2: every `return f(...)`
 * below between noipa functions is a sibling call, compiled to a `jmp` (the test checks with objdump). Runs once,
 * prints its results and exits 0; untraced it prints exactly the same. Calls:
 *   tail_caller(x) jumps to tail_callee(x + 1, x) = 10 (x + 1) + x + bias, for x = 1..ROUNDS
 *   is_even(9) jumps to is_odd(8), which jumps to is_even(7) ... down to is_odd(0) = 0: ten frames, one `call`
 *   tail_to_untraced(5) jumps to untraced_hop(5) (not traced), which calls tail_leaf(5) and adds 1
 * Each function first counts its call in a volatile global: that keeps the code the hooks overwrite (the first
 * 16 bytes) free of branch targets, and the functions from being folded away. */
#include <stdio.h>

#define ROUNDS 20

volatile long bias = 3;
volatile long counted;

__attribute__((noipa)) long tail_callee(long x, long y) {
    counted++;
    return 10 * x + y + bias;
}

__attribute__((noipa)) long tail_caller(long x) {
    counted++;
    return tail_callee(x + 1, x);
}

__attribute__((noipa)) long is_odd(long n);

__attribute__((noipa)) long is_even(long n) {
    counted++;
    if (n == 0) return 1;
    return is_odd(n - 1);
}

__attribute__((noipa)) long is_odd(long n) {
    counted++;
    if (n == 0) return 0;
    return is_even(n - 1);
}

__attribute__((noipa)) long tail_leaf(long x) {
    counted++;
    return x * x;
}

__attribute__((noipa)) long untraced_hop(long x) {
    counted++;
    return tail_leaf(x) + 1;
}

__attribute__((noipa)) long tail_to_untraced(long x) {
    counted++;
    return untraced_hop(x);
}

int main(void) {
    long total = 0;
    for (long x = 1; x <= ROUNDS; x++) total += tail_caller(x);
    printf("tail_caller total=%ld\n", total);
    printf("is_even(9)=%ld\n", is_even(9));
    printf("tail_to_untraced(5)=%ld\n", tail_to_untraced(5));
    printf("calls counted=%ld\n", counted);
    return 0;
}
