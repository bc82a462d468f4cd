/* A loop whose exit condition can never become true: the thread runs flat out in one function. */
#include <stdio.h>

static volatile unsigned long steps;

static unsigned long search_fixed_point(unsigned long x) {
    while (x != 0) { /* an odd x times an odd multiplier plus an even increment stays odd: never 0 */
        x = x * 6364136223846793005UL + 2;
        steps++;
    }
    return x;
}

int main(void) {
    printf("test solver::converges ... starting\n");
    fflush(stdout);
    printf("%lu\n", search_fixed_point(1));
    return 0;
}
