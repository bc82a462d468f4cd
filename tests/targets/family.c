/* Child processes for fork/exec following (tests/e2e/test_children.py).
 *
 *   family fork-crash CONTROL   forks a child that dereferences NULL; the parent waits for it and carries on
 *   family chain CONTROL 1      level 1 forks a child that exec()s `family chain CONTROL 2`, which does the same
 *                               for level 3: three processes, three images, level_one/two/three called in each
 *   family chain CONTROL 1 relative   the same, each child chdir()ing to the program's directory and exec()ing it
 *                               by a relative path (./family)
 *   family spawn CONTROL PROG   posix_spawn()s PROG (built without debug info) and waits for it
 *
 * Each mode prints "ready" and waits for the file "go" in CONTROL (see control.h) before doing anything.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control.h"

extern char **environ;

__attribute__((noinline)) int level_one(int x) { return x + 1; }
__attribute__((noinline)) int level_two(int x) { return x + 2; }
__attribute__((noinline)) int level_three(int x) { return x + 3; }
__attribute__((noinline)) int parent_work(int x) { return x * 2; }
__attribute__((noinline)) int child_work(int x) { return x * 3; }

__attribute__((noinline)) void child_crash(int *target) {
    int value = child_work(7);
    *target = value; /* NULL: SIGSEGV in the child only */
}

static void report(const char *what, int status) {
    if (WIFSIGNALED(status))
        printf("%s ended by signal %d\n", what, WTERMSIG(status));
    else
        printf("%s exited %d\n", what, WEXITSTATUS(status));
    fflush(stdout);
}

static void wait_for_go(void) {
    printf("ready\n");
    fflush(stdout);
    while (!exists("go"))
        usleep(10000);
}

static int fork_crash(void) {
    wait_for_go();
    parent_work(1);
    pid_t pid = fork();
    if (pid == 0) {
        child_crash(NULL);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    report("child", status);
    parent_work(2);
    printf("parent carries on\n");
    fflush(stdout);
    return 0;
}

static int chain(const char *self, int level, int relative) {
    if (level == 1)
        wait_for_go();
    int (*const steps[])(int) = {level_one, level_two, level_three};
    steps[level - 1](level);
    printf("level %d in pid %d\n", level, (int)getpid());
    fflush(stdout);
    if (level < 3) {
        pid_t pid = fork();
        if (pid == 0) {
            char next[8];
            snprintf(next, sizeof next, "%d", level + 1);
            char program[4096];
            snprintf(program, sizeof program, "%s", self);
            char *slash = strrchr(program, '/');
            if (relative && slash != NULL) {  /* "./family", from the directory it is in */
                *slash = '\0';
                if (program[0] != '\0' && chdir(program) != 0)
                    _exit(126);
                memmove(program + 2, slash + 1, strlen(slash + 1) + 1);
                memcpy(program, "./", 2);
            }
            char *const args[] = {program, "chain", (char *)control, next, relative ? "relative" : NULL, NULL};
            execve(program, args, environ);
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        report("level child", status);
    }
    return 0;
}

static int spawn(const char *program) {
    wait_for_go();
    pid_t pid;
    char *const args[] = {(char *)program, NULL};
    if (posix_spawn(&pid, program, NULL, NULL, args, environ) != 0) {
        perror("posix_spawn");
        return 1;
    }
    int status = 0;
    waitpid(pid, &status, 0);
    report("spawned", status);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    control = argv[2];
    if (strcmp(argv[1], "fork-crash") == 0)
        return fork_crash();
    if (strcmp(argv[1], "chain") == 0 && argc > 3)
        return chain(argv[0], atoi(argv[3]), argc > 4 && strcmp(argv[4], "relative") == 0);
    if (strcmp(argv[1], "spawn") == 0 && argc > 3)
        return spawn(argv[3]);
    return 2;
}
