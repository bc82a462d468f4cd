/* A target that calls hot_add() millions of times (usage: hot CONTROL_DIR CALLS) after CONTROL_DIR/go
 * appears, then cold_marker() once, prints "hot done" and exits. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((noinline)) long hot_add(long a, long b) { return a + b; }
__attribute__((noinline)) int cold_marker(int x) { return x; }

int main(int argc, char **argv) {
    char path[4096];
    struct stat st;
    long calls = argc > 2 ? atol(argv[2]) : 3000000;
    snprintf(path, sizeof path, "%s/go", argc > 1 ? argv[1] : ".");
    printf("ready\n");
    fflush(stdout);
    while (stat(path, &st) != 0) usleep(5000);
    long sum = 0;
    for (long i = 0; i < calls; i++) sum = hot_add(sum, i);
    cold_marker(1);
    printf("hot done %ld\n", sum);
    return 0;
}
