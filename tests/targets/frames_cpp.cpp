// Paused-frames target in C++ (usage: frames_cpp CONTROL_DIR): main -> shop::total_of(till, lines, 2) ->
// shop::Till::add_tax(70) -> shop::at_least_zero(75). Prints "ready", waits for CONTROL_DIR/go, prints "gross 75"
// (3 at 10 and 2 at 20: 70, plus 8% tax, rounded down), exits when CONTROL_DIR/quit exists.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace shop {
__attribute__((noinline)) int at_least_zero(int value) { return value < 0 ? 0 : value; }

struct Line {
    int price;
    int qty;
};

class Till {
public:
    int tax_percent = 8;

    __attribute__((noinline)) int add_tax(int net) {
        int tax = net * tax_percent / 100;
        int gross = at_least_zero(net + tax);
        return gross;
    }
};

__attribute__((noinline)) int total_of(Till &till, const Line *lines, int n) {
    int net = 0;
    for (int i = 0; i < n; i++) net += lines[i].price * lines[i].qty;
    int gross = till.add_tax(net);
    return gross;
}
}  // namespace shop

static bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

int main(int argc, char **argv) {
    std::string control = argc > 1 ? argv[1] : ".";
    std::printf("ready\n");
    std::fflush(stdout);
    while (!exists(control + "/go")) usleep(1000);
    shop::Till till;
    shop::Line lines[2] = {{10, 3}, {20, 2}};
    int result = shop::total_of(till, lines, 2);
    std::printf("gross %d\n", result);
    std::fflush(stdout);
    while (!exists(control + "/quit")) usleep(1000);
    return 0;
}
