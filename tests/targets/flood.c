/* flood N: writes N numbered 100-byte lines to stdout (every 100th also to stderr) as fast as write(2)
 * allows, then exits immediately. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n <= 0) return;
        buf += n;
        len -= (size_t)n;
    }
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    size_t cap = 1 << 20, used = 0;
    char *buf = malloc(cap);
    char line[128];
    for (long i = 0; i < n; i++) {
        int len = snprintf(line, sizeof line, "line %08ld %s\n", i,
                           "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefg");
        if (used + (size_t)len > cap) { write_all(1, buf, used); used = 0; }
        memcpy(buf + used, line, (size_t)len);
        used += (size_t)len;
        if (i % 100 == 0) {
            char err[64];
            int elen = snprintf(err, sizeof err, "progress %ld\n", i);
            write_all(2, err, (size_t)elen);
        }
    }
    write_all(1, buf, used);
    write_all(2, "flood done\n", 11);
    return 0;
}
