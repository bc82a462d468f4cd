// Shared by both C++ translation units: the template is instantiated in each, and the linker keeps one copy.
#ifndef CXXPROG_GEO_H
#define CXXPROG_GEO_H

namespace geo {
template <typename T>
struct Box {
    T value;
    T get() const { return value; } // LINE Box::get
    bool operator<(const Box &other) const { return value < other.value; } // LINE Box::operator<
};
}  // namespace geo

int box_total(int n);

#endif
