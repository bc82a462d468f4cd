// A C++ target for tracing (usage: shapes CONTROL_DIR): namespaces, classes, templates, overloads.
// Each time CONTROL_DIR/round-N appears it runs one round and prints "round N done"; CONTROL_DIR/quit ends it.
// Per round: submit::handle(3) -> form::validate(3) (false) and submit::retry(1); form::validate(12) (true);
// form::Form{4}.validate() (true); auth::validate(7); auth::user::validate("bob");
// twice<int>(21), twice<double>(1.5); geo::Box<int>{9}.get(); area(3) and area(2.0).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace form {
__attribute__((noinline)) bool validate(int fields) { return fields > 10; }
struct Form {
    int fields;
    __attribute__((noinline)) bool validate() const { return fields > 0; }
};
}  // namespace form

namespace submit {
__attribute__((noinline)) int retry(int attempt) { return attempt + 1; }
__attribute__((noinline)) int handle(int fields) {
    if (!form::validate(fields)) return retry(1);
    return 0;
}
}  // namespace submit

namespace auth {
__attribute__((noinline)) bool validate(int token) { return token == 7; }
namespace user {
__attribute__((noinline)) bool validate(const char *name) { return name[0] == 'b'; }
}  // namespace user
}  // namespace auth

template <typename T>
__attribute__((noinline)) T twice(T x) { return x * 2; }

namespace geo {
template <typename T>
struct Box {
    T v;
    __attribute__((noinline)) T get() const { return v; }
};
}  // namespace geo

__attribute__((noinline)) int area(int side) { return side * side; }
__attribute__((noinline)) double area(double radius) { return 3.0 * radius * radius; }

static bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

int main(int argc, char **argv) {
    std::string control = argc > 1 ? argv[1] : ".";
    std::printf("ready\n");
    std::fflush(stdout);
    for (int round = 1;; round++) {
        std::string next = control + "/round-" + std::to_string(round);
        while (!exists(next)) {
            if (exists(control + "/quit")) return 0;
            usleep(5000);
        }
        submit::handle(3);
        form::validate(12);
        form::Form f{4};
        f.validate();
        auth::validate(7);
        auth::user::validate("bob");
        twice<int>(21);
        twice<double>(1.5);
        geo::Box<int> box{9};
        box.get();
        area(3);
        area(2.0);
        std::printf("round %d done\n", round);
        std::fflush(stdout);
    }
}
