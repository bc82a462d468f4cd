// C++ exceptions through traced frames (tests/e2e/test_trace_control_flow.py). Runs once, prints its results and
// exits 0; untraced it prints exactly the same. For i = 0..ROUNDS-1:
//   catch_outer(i) -> pass_middle(i) -> throw_inner(i), which throws Failure{i}; pass_middle's local Guard is
//       destroyed on the way (counted); catch_outer catches it and returns 10 i + 1. Then after_catch(i).
//   catch_own(i): throws and catches inside itself, returns 100 + i.
//   catch_rethrown(i) -> rethrow_middle(i) -> throw_inner(i); rethrow_middle catches, calls in_catch(i), rethrows;
//       catch_rethrown catches it and returns 1000 + i.
// Then main's own try around pass_middle(ROUNDS) (an untraced catch), and finally after_catch(99).
// A throw that finds no handler (it never happens untraced) ends in a terminate handler that says so on stderr and
// exits with 70: quicker for a test to read than abort()'s crash.
#include <cstdio>
#include <cstdlib>
#include <exception>

namespace {
int guards_destroyed = 0;
}

struct Failure {
    int code;
};

struct Guard {
    ~Guard() { guards_destroyed++; }
};

__attribute__((noinline)) int throw_inner(int i) {
    if (i >= 0) throw Failure{i};
    return i;
}

__attribute__((noinline)) int pass_middle(int i) {
    Guard guard;
    return throw_inner(i) + 1;
}

__attribute__((noinline)) int catch_outer(int i) {
    try {
        return pass_middle(i) + 1000000;
    } catch (const Failure &failure) {
        return 10 * failure.code + 1;
    }
}

__attribute__((noinline)) int after_catch(int i) { return i + 7; }

__attribute__((noinline)) int catch_own(int i) {
    try {
        if (i >= 0) throw Failure{100 + i};
        return i;
    } catch (const Failure &failure) {
        return failure.code;
    }
}

__attribute__((noinline)) int in_catch(int i) { return 2 * i; }

__attribute__((noinline)) int rethrow_middle(int i) {
    try {
        return throw_inner(i);
    } catch (const Failure &) {
        in_catch(i);
        throw;
    }
}

__attribute__((noinline)) int catch_rethrown(int i) {
    try {
        return rethrow_middle(i) + 1000000;
    } catch (const Failure &failure) {
        return 1000 + failure.code;
    }
}

static const int ROUNDS = 50;

int main() {
    std::set_terminate([] {
        std::fputs("std::terminate\n", stderr);
        std::_Exit(70);
    });
    long outer = 0, own = 0, rethrown = 0, after = 0;
    for (int i = 0; i < ROUNDS; i++) {
        outer += catch_outer(i);
        after += after_catch(i);
        own += catch_own(i);
        rethrown += catch_rethrown(i);
    }
    std::printf("catch_outer total=%ld\n", outer);
    std::printf("after_catch total=%ld\n", after);
    std::printf("catch_own total=%ld\n", own);
    std::printf("catch_rethrown total=%ld\n", rethrown);
    int caught_in_main = -1;
    try {
        pass_middle(ROUNDS);
    } catch (const Failure &failure) {
        caught_in_main = failure.code;
    }
    std::printf("caught in main=%d\n", caught_in_main);
    std::printf("guards destroyed=%d\n", guards_destroyed);
    std::printf("after_catch(99)=%d\n", after_catch(99));
    std::printf("done\n");
    return 0;
}
