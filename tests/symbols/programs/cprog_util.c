#include <stdio.h>
#include <stdlib.h>

#include "cprog_util.h"

static int util_helper(int v) { return v * 3; } /* LINE util_helper */

__attribute__((cold, noinline)) static void util_report(int v) { fprintf(stderr, "bad %d\n", v); }

int util_scale(int value, int factor) /* LINE util_scale */
{
    return util_clamp(util_helper(value) * factor);
}

/* At -O2 gcc splits this into a hot part and util_check.cold: DW_AT_ranges instead of DW_AT_low_pc. */
int util_check(int v) /* LINE util_check */
{
    if (v < -1000) {
        util_report(v);
        fprintf(stderr, "value out of range: %d %d %d\n", v, v * 3, v / 7);
        exit(3);
    }
    return v + 1;
}
