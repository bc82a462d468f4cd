// A test binary that can't start: a global's constructor fails before main(), as a missing fixture would.
#include <cstdio>
#include <cstdlib>

namespace {
struct Fixture {
    Fixture() {
        std::fprintf(stderr, "fixture data/calc.csv is missing\n");
        std::exit(3);
    }
} fixture;
}  // namespace
