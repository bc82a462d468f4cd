/* Traced functions under unusual control flow (tests/e2e/test_trace_control_flow.py). Usage: control_flow MODE
 * Each mode runs once, prints its results and exits 0; untraced it prints exactly the same. Modes:
 *   recursion     sum_to(5) and sum_to(200) (sum_to(n) = n + sum_to(n - 1), sum_to(0) = 0: one frame per level,
 *                 201 deep), then leaf(1)
 *   threads       8 threads "cf-0".."cf-7" released together by a barrier, each calling thread_work(t, k) for
 *                 k = 0..CALLS-1 and yielding the CPU after each (so that they interleave even on few cores);
 *                 thread_work calls thread_leaf(1000 t + k) once
 *   longjmp       JUMPS times: jump_runner(i) (setjmp in it) -> jump_via(i) -> jump_down(i), which longjmps back
 *                 into jump_runner; jump_runner then calls after_jump(i) and returns. Then JUMPS_FROM_MAIN times
 *                 the same from main (setjmp in main, untraced), each followed by after_jump(i) from main.
 *                 Then leaf(2).
 *   longjmp_recursive  DESCENTS times: descend(3, 3) recurses to descend(0, 3), which longjmps back into the
 *                 outermost level (its setjmp); that level returns 1003. Then leaf(6).
 *   signals       ROUNDS times: raise_from(k) raises SIGUSR1 (handled synchronously inside it),
 *                 wait_for_alarm(k) arms a one-shot ITIMER_REAL and spins until its SIGALRM was handled,
 *                 raise_on_altstack(k) raises SIGUSR2, whose handler runs on an alternate signal stack (malloc'd:
 *                 below the thread's stack). Then a thread "cf-alt" whose alternate stack lies above its own stack
 *                 (in the main thread's) calls raise_on_altstack(k) ROUNDS times. Every handler calls
 *                 in_handler(sig, n) -> signal_leaf(n) (n counts handled signals). Then leaf(3).
 *   pthread_exit  EXITING threads "px-0".., one after the other, each calling exit_outer(i) -> exit_inner(i),
 *                 which ends the thread with pthread_exit(10 i + 1); main joins each and prints what it got.
 *                 Then a thread "px-after" calls leaf(4) and main calls leaf(5). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define THREADS 8
#define CALLS 100
#define JUMPS 1000
#define JUMPS_FROM_MAIN 200
#define ROUNDS 4
#define EXITING 6
#define ALTSTACK_SIZE (256 * 1024)

__attribute__((noinline)) int leaf(int x) { return x + 1; }

/* recursion */

__attribute__((noinline)) long sum_to(long n) { return n == 0 ? 0 : n + sum_to(n - 1); }

static int recursion(void) {
    printf("sum_to(5)=%ld\n", sum_to(5));
    printf("sum_to(200)=%ld\n", sum_to(200));
    printf("leaf(1)=%d\n", leaf(1));
    return 0;
}

/* threads */

static pthread_barrier_t start_together;
static long thread_sums[THREADS];

__attribute__((noinline)) long thread_leaf(long v) { return 2 * v; }
__attribute__((noinline)) long thread_work(int t, int k) { return thread_leaf(1000L * t + k) + 1; }

static void *thread_main(void *arg) {
    int t = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "cf-%d", t);
    pthread_setname_np(pthread_self(), name);
    pthread_barrier_wait(&start_together);
    long sum = 0;
    for (int k = 0; k < CALLS; k++) {
        sum += thread_work(t, k);
        sched_yield();
    }
    thread_sums[t] = sum;
    return NULL;
}

static int threads(void) {
    pthread_t ids[THREADS];
    pthread_barrier_init(&start_together, NULL, THREADS);
    for (long t = 0; t < THREADS; t++) pthread_create(&ids[t], NULL, thread_main, (void *)t);
    for (int t = 0; t < THREADS; t++) pthread_join(ids[t], NULL);
    for (int t = 0; t < THREADS; t++) printf("thread %d sum=%ld\n", t, thread_sums[t]);
    return 0;
}

/* longjmp */

static jmp_buf jump_target;
static volatile int landed_with;

__attribute__((noinline)) int after_jump(int i) { return 3 * i; }

__attribute__((noinline)) int jump_down(int i) {
    landed_with = i + 1;
    longjmp(jump_target, 1);
}

__attribute__((noinline)) int jump_via(int i) { return jump_down(i) + 1; /* never returns */ }

__attribute__((noinline)) long jump_runner(int i) {
    landed_with = 0;
    if (setjmp(jump_target) == 0) jump_via(i);
    return landed_with + after_jump(i); /* (i + 1) + 3 i */
}

static int longjumps(void) {
    long total = 0;
    for (int i = 0; i < JUMPS; i++) total += jump_runner(i);
    printf("jump_runner total=%ld\n", total);
    long from_main = 0;
    for (volatile int i = 0; i < JUMPS_FROM_MAIN; i++) {
        landed_with = 0;
        if (setjmp(jump_target) == 0) jump_via(i);
        from_main += landed_with + after_jump(i);
    }
    printf("from main total=%ld\n", from_main);
    printf("leaf(2)=%d\n", leaf(2));
    return 0;
}

/* longjmp_recursive */

#define DESCENTS 5

static jmp_buf descent;

__attribute__((noinline)) int descend(int n, int top) {
    if (n == top) {
        if (setjmp(descent) != 0) return 1000 + n;
    }
    if (n == 0) longjmp(descent, 1);
    return descend(n - 1, top) + 1;
}

static int recursive_longjumps(void) {
    long total = 0;
    for (int i = 0; i < DESCENTS; i++) total += descend(3, 3);
    printf("descend total=%ld\n", total);
    printf("leaf(6)=%d\n", leaf(6));
    return 0;
}

/* signals */

static volatile sig_atomic_t handled;
static int handler_results[4 * ROUNDS];
static int on_altstack[4 * ROUNDS];

__attribute__((noinline)) int signal_leaf(int n) { return 7 * n; }
__attribute__((noinline)) int in_handler(int sig, int n) { return 100 * sig + signal_leaf(n); }

static void on_signal(int sig) {
    int n = handled;
    stack_t current;
    handler_results[n] = in_handler(sig, n);
    on_altstack[n] = sigaltstack(NULL, &current) == 0 && (current.ss_flags & SS_ONSTACK) != 0;
    handled = n + 1;
}

__attribute__((noinline)) int raise_from(int k) {
    int before = handled;
    raise(SIGUSR1);
    return 10 * k + (handled - before);
}

__attribute__((noinline)) int wait_for_alarm(int k) {
    int before = handled;
    struct itimerval once = {.it_interval = {0, 0}, .it_value = {0, 2000}};
    setitimer(ITIMER_REAL, &once, NULL);
    while (handled == before) {
    }
    return 20 * k + (handled - before);
}

__attribute__((noinline)) int raise_on_altstack(int k) {
    int before = handled;
    raise(SIGUSR2);
    return 30 * k + (handled - before);
}

static void *altstack_thread(void *above) {
    char here;
    pthread_setname_np(pthread_self(), "cf-alt");
    stack_t ss = {.ss_sp = above, .ss_size = ALTSTACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) return NULL;
    printf("cf-alt: altstack above its stack=%d\n", &here < (char *)above);
    for (int k = 0; k < ROUNDS; k++) printf("cf-alt: raise_on_altstack(%d)=%d\n", k, raise_on_altstack(k));
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    return NULL;
}

static int signals(void) {
    stack_t ss = {.ss_sp = malloc(ALTSTACK_SIZE), .ss_size = ALTSTACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) return 1;
    struct sigaction plain, onstack;
    memset(&plain, 0, sizeof plain);
    plain.sa_handler = on_signal;
    sigemptyset(&plain.sa_mask);
    onstack = plain;
    onstack.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &plain, NULL);
    sigaction(SIGALRM, &plain, NULL);
    sigaction(SIGUSR2, &onstack, NULL);
    for (int k = 0; k < ROUNDS; k++) {
        printf("raise_from(%d)=%d\n", k, raise_from(k));
        printf("wait_for_alarm(%d)=%d\n", k, wait_for_alarm(k));
        printf("raise_on_altstack(%d)=%d\n", k, raise_on_altstack(k));
    }
    fflush(stdout);
    char above[ALTSTACK_SIZE]; /* in this thread's stack: above any other thread's */
    pthread_t id;
    pthread_create(&id, NULL, altstack_thread, above);
    pthread_join(id, NULL);
    for (int n = 0; n < handled; n++) printf("handler %d: %d altstack=%d\n", n, handler_results[n], on_altstack[n]);
    printf("leaf(3)=%d\n", leaf(3));
    return 0;
}

/* pthread_exit */

__attribute__((noinline)) int exit_inner(int i) {
    pthread_exit((void *)(long)(10 * i + 1));
}

__attribute__((noinline)) int exit_outer(int i) { return exit_inner(i) + 1; /* never returns */ }

static void *exiting_thread(void *arg) {
    int i = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "px-%d", i);
    pthread_setname_np(pthread_self(), name);
    exit_outer(i);
    return (void *)-1L; /* not reached */
}

static void *after_thread(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "px-after");
    return (void *)(long)leaf(4);
}

static int thread_exits(void) {
    for (long i = 0; i < EXITING; i++) {
        pthread_t id;
        void *got;
        pthread_create(&id, NULL, exiting_thread, (void *)i);
        pthread_join(id, &got);
        printf("thread %ld exited with %ld\n", i, (long)got);
    }
    pthread_t id;
    void *got;
    pthread_create(&id, NULL, after_thread, NULL);
    pthread_join(id, &got);
    printf("after thread returned %ld\n", (long)got);
    printf("leaf(5)=%d\n", leaf(5));
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    int status = 2;
    if (strcmp(mode, "recursion") == 0) status = recursion();
    else if (strcmp(mode, "threads") == 0) status = threads();
    else if (strcmp(mode, "longjmp") == 0) status = longjumps();
    else if (strcmp(mode, "longjmp_recursive") == 0) status = recursive_longjumps();
    else if (strcmp(mode, "signals") == 0) status = signals();
    else if (strcmp(mode, "pthread_exit") == 0) status = thread_exits();
    else fprintf(stderr, "unknown mode '%s'\n", mode);
    printf("%s done\n", mode);
    return status;
}
