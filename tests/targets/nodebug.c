/* A program built without debug info (tests/e2e/test_children.py): it prints, then dereferences NULL. */
#include <stdio.h>

int main(void) {
    printf("nodebug says hello\n");
    fflush(stdout);
    volatile int *target = NULL;
    *target = 1;
    return 0;
}
