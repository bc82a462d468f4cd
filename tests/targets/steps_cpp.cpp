// Stepping target in C++ (usage: steps_cpp CONTROL_DIR): prints "ready", waits for CONTROL_DIR/go, then sums the
// areas of two shapes through a virtual call and prints "total 13" (a 2x3 Rect: 6, an Odd(3): 7).
#include <cstdio>
#include <memory>
#include <unistd.h>
#include <vector>
#include "control.h"

struct Shape {
    virtual ~Shape() = default;
    virtual int area() const = 0;
};

struct Rect : Shape {
    int w, h;
    Rect(int w_, int h_) : w(w_), h(h_) {}
    int area() const override {
        int a = w * h;
        return a;
    }
};

struct Odd : Shape {
    int n;
    explicit Odd(int n_) : n(n_) {}
    int area() const override {
        return n + 4;
    }
};

__attribute__((noinline)) int total(const std::vector<std::unique_ptr<Shape>> &shapes) {
    int sum = 0;
    for (const auto &shape : shapes) {
        sum += shape->area();
    }
    return sum;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    std::printf("ready\n");
    std::fflush(stdout);
    while (!exists("go")) usleep(1000);
    std::vector<std::unique_ptr<Shape>> shapes;
    shapes.push_back(std::make_unique<Rect>(2, 3));
    shapes.push_back(std::make_unique<Odd>(3));
    std::printf("total %d\n", total(shapes));
    std::fflush(stdout);
    return 0;
}
