/* Says it is ready, prints a prompt without a newline, then waits forever (until killed). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    printf("ready\n");
    char big[9000 + 2];
    memset(big, 'x', 9000);
    big[9000] = '\n';
    big[9001] = 0;
    fputs(big, stdout);
    fputs("bad bytes: \xff\xfe end\n", stdout);
    printf("Enter value: ");
    fflush(stdout);
    for (;;) pause();
}
