/* How the C test targets are driven: the test creates files in a control directory (tests/conftest.py
 * Control) and the target polls for them. Set `control` from argv before calling exists(). */
#ifndef STROBE_TEST_CONTROL_H
#define STROBE_TEST_CONTROL_H

#include <stdio.h>
#include <sys/stat.h>

static const char *control = ".";

static int exists(const char *name) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", control, name);
    return stat(path, &st) == 0;
}

#endif
