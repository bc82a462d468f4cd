"""Generator of the hooked-functions target (bench/curves.py): FUNCTIONS tiny functions hook_0000, hook_0001, …,
written as C into the build directory and compiled there, so a 10,000-function source is never committed.

    python bench/targets/hooks.py FUNCTIONS OUT_DIR      # writes OUT_DIR/hooks-FUNCTIONS.c, builds hooks-FUNCTIONS

The program: usage hooks-FUNCTIONS N CALLS REPS GO_FILE [PAUSE_MS]
Prints "ready", waits for GO_FILE ("-": none), then REPS times: a loop of CALLS calls cycling through the first N
functions (hook_0000, hook_0001, …, hook_<N-1>, hook_0000, …), then a loop of CALLS calls to hook_0000 alone. Both go
through the same function-pointer table and loop code, so they differ only in which functions run. After each loop
it prints "<all|one> <rep> <wall ns> <thread cpu ns>" and pauses PAUSE_MS (default 300); then, with a GO_FILE, it
waits for GO_FILE.<k> before its k-th loop (k = 1, 2, …), so the tracer can say when it has drained the loops so
far. Then "done".

`pattern(n)` is the trace pattern that selects exactly the first n functions (n = 1 or a power of ten).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DIGITS = 4
MAX_FUNCTIONS = 10**DIGITS

_MAIN = r"""
static long long now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* CALLS calls cycling through the first n functions of the table. */
static void timed_loop(const char *label, int rep, long n, long calls) {
    volatile long sum = 0;
    long j = 0;
    long long c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    long long t0 = now_ns(CLOCK_MONOTONIC);
    for (long i = 0; i < calls; i++) {
        sum = table[j](sum, i);
        if (++j == n) j = 0;
    }
    long long t1 = now_ns(CLOCK_MONOTONIC);
    long long c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
    printf("%s %d %lld %lld\n", label, rep, t1 - t0, c1 - c0);
    fflush(stdout);
}

/* After loop k-1: the pause, then (with a GO_FILE) GO_FILE.k. */
static void between(const char *go, int k, long pause_ms) {
    usleep((useconds_t)pause_ms * 1000);
    if (go == NULL) return;
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s.%d", go, k);
    while (stat(path, &st) != 0) usleep(2000);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : FUNCTIONS;
    long calls = argc > 2 ? atol(argv[2]) : 100000;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    long pause_ms = argc > 5 ? atol(argv[5]) : 300;
    if (n < 1 || n > FUNCTIONS) {
        fprintf(stderr, "N: 1 to %d\n", FUNCTIONS);
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    const char *go = argc > 4 && argv[4][0] != '-' ? argv[4] : NULL;
    struct stat st;
    while (go != NULL && stat(go, &st) != 0) usleep(2000);
    for (int r = 0; r < reps; r++) {
        timed_loop("all", r, n, calls);
        between(go, 2 * r + 1, pause_ms);
        timed_loop("one", r, 1, calls);
        if (r + 1 < reps) between(go, 2 * r + 2, pause_ms);
    }
    printf("done\n");
    fflush(stdout);
    return 0;
}
"""


def name(index: int) -> str:
    return f"hook_{index:0{DIGITS}d}"


def pattern(n: int) -> str:
    """The pattern selecting hook_0000 … hook_<n-1>: n must be 1 or a power of ten up to MAX_FUNCTIONS."""
    if n == 1:
        return name(0)
    zeros = DIGITS - len(str(n)) + 1
    if n > MAX_FUNCTIONS or n != 10 ** (DIGITS - zeros):
        raise ValueError(f"no pattern selects exactly the first {n} functions (use 1 or a power of ten)")
    return "hook_" + "0" * zeros + "*"


def source(functions: int) -> str:
    if not 1 <= functions <= MAX_FUNCTIONS:
        raise ValueError(f"functions: 1 to {MAX_FUNCTIONS}")
    lines = ["#include <stdio.h>", "#include <stdlib.h>", "#include <sys/stat.h>", "#include <time.h>",
             "#include <unistd.h>", f"#define FUNCTIONS {functions}"]
    # Distinct bodies, so no toolchain can fold them into one.
    lines += [f"__attribute__((noinline)) long {name(i)}(long a, long b) {{ return a + b + {i}; }}"
              for i in range(functions)]
    lines.append("static long (*const table[FUNCTIONS])(long, long) = {")
    lines += [f"    {name(i)}," for i in range(functions)]
    lines.append("};")
    return "\n".join(lines) + "\n" + _MAIN


def build(functions: int, out_dir: Path) -> Path:
    """The compiled target (kept in `out_dir`; rebuilt when this generator is newer)."""
    out = (out_dir / f"hooks-{functions}").absolute()
    if out.exists() and out.stat().st_mtime >= Path(__file__).stat().st_mtime:
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    c_file = out.with_suffix(".c")
    c_file.write_text(source(functions))
    subprocess.run(["gcc", "-g", "-O0", "-o", str(out), str(c_file)], check=True)
    return out


if __name__ == "__main__":
    print(build(int(sys.argv[1]), Path(sys.argv[2])))
