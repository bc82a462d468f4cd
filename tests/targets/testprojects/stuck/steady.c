/* Idle nearly all the time -- parked in poll() waiting for a reply that never comes, same stack every time --
 * but it prints a line every 250 ms: output keeps coming, so it must never be called stuck. Without its output
 * it would look exactly like blocked_read. argv[1]: how many lines (default 40, i.e. 10 s). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int wait_briefly_for_reply(int fd) {
    struct pollfd reply = {fd, POLLIN, 0};
    return poll(&reply, 1, 250);
}

int main(int argc, char **argv) {
    int lines = argc > 1 ? atoi(argv[1]) : 40;
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 2;
    }
    for (int i = 0; i < lines; i++) {
        printf("tick %d\n", i);
        fflush(stdout);
        wait_briefly_for_reply(fds[0]);
    }
    printf("done\n");
    return 0;
}
