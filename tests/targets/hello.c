/* Prints its arguments, working directory and one environment variable, then exits with EXIT_CODE (default 7). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    printf("hello from stdout\n");
    for (int i = 1; i < argc; i++) printf("arg[%d]=%s\n", i, argv[i]);
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) printf("cwd=%s\n", cwd);
    const char *v = getenv("STROBE_TEST_VAR");
    printf("env=%s\n", v ? v : "(unset)");
    fflush(stdout);
    fprintf(stderr, "error: widget count is %d, expected 4\n", 3);
    const char *code = getenv("EXIT_CODE");
    return code ? atoi(code) : 7;
}
