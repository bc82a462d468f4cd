/* A function a hook at its entry would break, and one it would not. Usage: prologue_loop CONTROL_DIR
 * Prints "ready", then runs one round each time CONTROL_DIR/round-N appears (N = 1, 2, ...): for n = 1..20 it
 * prints "sum(n)=S scale(n)=T" (S = 1 + ... + n, T = 3n) and then "round N done"; exits 0 when CONTROL_DIR/quit
 * appears.
 *
 * prologue_sum is written in assembly so its bytes are known: its loop jumps back to +2, inside the bytes a hook's
 * jump overwrites at its entry (Strobe refuses to hook it: symbols/hook_safety.py). Hooked anyway, the loop would
 * run the middle of the hook's jump: a crash (SIGILL, SIGSEGV) or wrong sums. prologue_scale is plain C. */
#include <stdio.h>
#include <unistd.h>
#include "control.h"

int prologue_sum(int n); /* 1 + 2 + ... + n, for n >= 1 */

__asm__(".intel_syntax noprefix\n"
        ".text\n"
        ".globl prologue_sum\n"
        ".type prologue_sum, @function\n"
        "prologue_sum:\n"
        "    xor eax, eax\n"      /* +0 */
        "1:  add eax, edi\n"      /* +2: the loop's start */
        "    dec edi\n"
        "    jg 1b\n"             /* back to +2 while n > 0 */
        "    ret\n"
        ".size prologue_sum, .-prologue_sum\n"
        ".att_syntax prefix\n");

__attribute__((noinline)) int prologue_scale(int n) { return 3 * n; }

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    printf("ready\n");
    fflush(stdout);
    for (int round = 1;; round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!exists(name)) {
            if (exists("quit")) return 0;
            usleep(5000);
        }
        for (int n = 1; n <= 20; n++) printf("sum(%d)=%d scale(%d)=%d\n", n, prologue_sum(n), n, prologue_scale(n));
        printf("round %d done\n", round);
        fflush(stdout);
    }
}
