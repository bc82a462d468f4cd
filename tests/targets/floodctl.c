/* Writes numbered lines to stdout as fast as it can until the file named by argv[1] exists (checked every
 * 1000 lines) or argv[2] lines are written, then exits with code 7 (stopped by the file) or 0. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *stop = argc > 1 ? argv[1] : "/nonexistent";
    long limit = argc > 2 ? atol(argv[2]) : -1;
    for (long i = 0; limit < 0 || i < limit; i++) {
        printf("line %ld: the quick brown fox jumps over the lazy dog, again and again and again and again\n", i);
        if (i % 1000 == 0 && access(stop, F_OK) == 0) {
            fflush(stdout);
            return 7;
        }
    }
    return 0;
}
