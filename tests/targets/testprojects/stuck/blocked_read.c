/* Waits for a reply on a pipe nobody will ever write to (this process keeps the write end open):
 * 0% CPU, one thread parked in read(). Neither a deadlock nor a loop. */
#include <stdio.h>
#include <unistd.h>

static long wait_for_reply(int fd) {
    char reply[64];
    return (long)read(fd, reply, sizeof reply);
}

int main(void) {
    int fds[2];
    if (pipe(fds) != 0) {
        perror("pipe");
        return 2;
    }
    printf("test client::handshake ... waiting for the server\n");
    fflush(stdout);
    printf("%ld\n", wait_for_reply(fds[0]));
    return 0;
}
