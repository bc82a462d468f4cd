// Not part of the CMake build: a suite whose second test crashes the process (GoogleTest catches no signals,
// so it never writes its report). The tests compile it on its own.
#include <gtest/gtest.h>

namespace calc {
int read_through(const int* p) { return *p; }
}  // namespace calc

TEST(CrashUnit, Fine) { EXPECT_EQ(1 + 1, 2); }

TEST(CrashUnit, DereferencesNull) {
    volatile const int* p = nullptr;
    EXPECT_EQ(calc::read_through(const_cast<const int*>(p)), 0);
}

TEST(CrashUnit, NeverReached) { EXPECT_TRUE(true); }
