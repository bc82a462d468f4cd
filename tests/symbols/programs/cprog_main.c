/* A small C program for the symbol index tests. Line numbers are asserted by the tests: keep the
   LINE markers next to the functions they name. */
#include <stdio.h>
#include <stdlib.h>

#include "cprog_util.h"

static int counter;

static inline __attribute__((always_inline)) int add_inline(int a, int b) { return a + b + counter; } /* LINE add_inline */

static int bump(int by) /* LINE bump */
{
    counter += by;
    return counter;
}

int process_command(const char *cmd, int len) /* LINE process_command */
{
    int total = 0;
    for (int i = 0; i < len; i++) {
        total = add_inline(total, cmd[i]);
    }
    return bump(total % 7);
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "hello";
    int r = process_command(cmd, 5);
    r += util_scale(r, argc);
    r += util_check(r);
    printf("%d\n", r);
    return r == 12345 ? 1 : 0;
}
