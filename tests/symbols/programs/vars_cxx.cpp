// C++ globals for the variable/type tests: namespaces, class statics, inheritance, references.
// Initial values are asserted by decoding the bytes of .data: keep them in step with the tests.
#include <cstdio>

namespace audio {
double gTempo = 120.5;
namespace detail {
int gDepth = 3;
}  // namespace detail

class Clock {
public:
    static int instances;
    static const char *kName;
    long counter;
    Clock *self;
    int tick() { return static_cast<int>(++counter); }
};
int Clock::instances = 2;
const char *Clock::kName = "clock";

Clock gClock = {41, nullptr};
Clock *gClockPtr = &gClock;
}  // namespace audio

struct Base {
    int base_field;
    double base_ratio;
};
struct Other {
    short other_tag;
};
struct Derived : Base, Other {
    int own;
};
Derived gDerived = {{10, 2.5}, {6}, 20};
Derived *gDerivedPtr = &gDerived;
Derived &gDerivedRef = gDerived;

namespace {
int gHidden = 5;
}

int sum(const Derived &d, int scale, audio::Clock *clock)
{
    static int sumCalls = 0;
    ++sumCalls;
    return (d.base_field + d.own) * scale + clock->tick() + gHidden;
}

int main()
{
    std::printf("%d %d %s\n", sum(gDerivedRef, 2, audio::gClockPtr), audio::Clock::instances,
                audio::Clock::kName);
    return audio::detail::gDepth == 3 ? 0 : 1;
}
