/* Calls lib_scale() from libmathlib.so once per round (usage: uses_lib CONTROL_DIR); see traced.c for
 * the round protocol. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int lib_scale(int value, int factor);

static int exists(const char *dir, const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

int main(int argc, char **argv) {
    const char *control = argc > 1 ? argv[1] : ".";
    printf("ready\n");
    fflush(stdout);
    for (int round = 1;; round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!exists(control, name)) {
            if (exists(control, "quit")) return 0;
            usleep(5000);
        }
        printf("scaled %d\n", lib_scale(round, 10));
        printf("round %d done\n", round);
        fflush(stdout);
    }
}
