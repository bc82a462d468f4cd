#pragma once
#include <stdexcept>

namespace calc {

inline int add(int a, int b) { return a + b; }

// Bug on purpose: the upper bound is treated as exclusive.
inline int clamp(int value, int lo, int hi) {
    if (value < lo) return lo;
    if (value >= hi) return hi - 1;
    return value;
}

inline int divide(int a, int b) {
    if (b == 0) throw std::domain_error("division by zero");
    return a / b;
}

}  // namespace calc
