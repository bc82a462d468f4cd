// A small C++ program for the symbol index tests. Keep the LINE markers next to what they name.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cxxprog_geo.h"

namespace auth {

class User {
public:
    explicit User(int id) : id_(id) {} // LINE User::User
    bool validate(int token) const; // LINE decl validate
    int id() const { return id_; } // LINE User::id
    static User make(int id) { return User(id); }
    explicit operator bool() const { return id_ != 0; } // LINE User::operator bool

private:
    int id_;
};

bool User::validate(int token) const // LINE User::validate
{
    return token == id_ * 7;
}

int check(int a) { return a + 1; } // LINE check(int)
int check(const char *s, int n) { return s[0] + n; } // LINE check(const char*, int)

namespace detail {
namespace deep {
int depth(int x) { return x * 2; } // LINE deep::depth
}  // namespace deep
}  // namespace detail

}  // namespace auth

namespace {
int helper(int x) { return x - 1; } // LINE anon helper
}  // namespace

struct Outer {
    struct Inner;
};

struct Outer::Inner {
    int twice(int v) const;
};

int Outer::Inner::twice(int v) const { return v * 2; } // LINE Inner::twice

struct Adder {
    int base;
    int operator()(int x) const { return base + x; } // LINE Adder::operator()
};

class Shape {
public:
    virtual ~Shape() = default;
    virtual double area() const { return 0.0; } // LINE Shape::area
};

class Square : public Shape {
public:
    explicit Square(double s) : side(s) {}
    double area() const override { return side * side; } // LINE Square::area

private:
    double side;
};

std::string label(const std::string &s) { return "<" + s + ">"; } // LINE label

std::string make_label(int n) { return std::to_string(n); } // LINE make_label

int apply(int (*fn)(int), int v) { return fn(v); } // LINE apply

int main(int argc, char **)
{
    auth::User u = auth::User::make(argc);
    int r = u.validate(argc * 7) ? 1 : 0;
    r += u ? 1 : 0;
    r += auth::check(argc) + auth::check("x", argc) + auth::detail::deep::depth(argc) + helper(argc);
    geo::Box<int> bi{argc};
    geo::Box<double> bd{argc * 1.5};
    r += bi.get() + static_cast<int>(bd.get()) + (bi < bi ? 1 : 0) + (bd < bd ? 1 : 0) + box_total(argc);
    Adder add{3};
    r += add(argc);
    auto lam = [r](int x) { return x + r; }; // LINE lambda
    r += lam(argc);
    Square sq(2.0);
    Shape *sh = &sq;
    r += static_cast<int>(sh->area());
    r += static_cast<int>(label("a").size() + make_label(argc).size());
    r += apply(auth::check, argc);
    r += Outer::Inner{}.twice(argc);
    std::vector<int> v{1, 2, 3};
    std::function<int(int)> f = [&v](int i) { return v[static_cast<size_t>(i) % v.size()]; };
    r += f(argc);
    std::printf("%d %d\n", r, u.id());
    return 0;
}
