/* stdin_lines [--wait]: reads lines from stdin until end-of-file, echoing each as "read N: <line>" and adding up the
 * integers they hold; then prints "eof after N lines, sum S" and exits with S % 256. A program that never sees
 * end-of-file never prints that line nor exits. --wait: after that line, waits (until killed) instead of exiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    char line[4096];
    long sum = 0;
    int count = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin) != NULL) {
        count++;
        line[strcspn(line, "\n")] = '\0';
        sum += strtol(line, NULL, 10);
        printf("read %d: %s\n", count, line);
    }
    printf("eof after %d lines, sum %ld\n", count, sum);
    if (argc > 1 && strcmp(argv[1], "--wait") == 0) {
        for (;;) {
            pause();
        }
    }
    return (int)(sum % 256);
}
