// C++ parameter passing (Itanium C++ ABI on System V x86-64): `this` in the first integer register, a class
// with a non-trivial destructor or copy constructor passed and returned through a hidden reference whatever its
// size, enum classes, bool returns. main calls each once with the values tests/daemon/test_signatures.py expects.
#include <cstdio>
#include <string>

enum class Level : short { Low = 1, High = 2 };

struct Counter {
    int total;
    __attribute__((noinline)) long add(int by, double scale, long extra) {
        total += by;
        return total + (long)scale + extra;
    }
    __attribute__((noinline)) bool positive() const { return total > 0; }
};

struct Handle {  // 4 bytes, but not trivially copyable: passed and returned by hidden reference
    int fd;
    explicit Handle(int f) : fd(f) {}
    Handle(const Handle& other) : fd(other.fd) {}
    ~Handle() { fd = -1; }
};

struct Plain { int x; int y; };  // trivially copyable: one register

__attribute__((noinline)) int use_handle(Handle h, int after) { return h.fd + after; }
__attribute__((noinline)) Handle open_handle(int fd) { return Handle(fd); }
__attribute__((noinline)) int use_plain(Plain p, Level level) { return p.x + p.y + (int)level; }
__attribute__((noinline)) Level level_of(int x) { return x > 5 ? Level::High : Level::Low; }
__attribute__((noinline)) std::size_t name_length(std::string name, int extra) { return name.size() + extra; }
__attribute__((noinline)) std::string repeat(const std::string& word, int times) {
    std::string out;
    for (int i = 0; i < times; i++) out += word;
    return out;
}

int main() {
    Counter counter{3};
    long total = counter.add(4, 0.5, -7);
    total += counter.positive();
    total += use_handle(Handle(11), 12);
    total += open_handle(13).fd;
    total += use_plain(Plain{14, -15}, Level::High);
    total += (int)level_of(16);
    total += (long)name_length("seventeen", 18);
    total += (long)repeat("ab", 3).size();
    std::printf("%ld\n", total);
    return 0;
}
