// libstdc++ types as arguments and return values (usage: std_values CONTROL_DIR [once]). Prints "ready", then
// runs one round of calls per file "round-N" in the control directory and prints "round N done"; with a
// second argument "once", runs one round at once and exits (for gdb). Every round passes the same values:
// tests/e2e/test_lang_values.py compares what Strobe shows for them with what gdb reads from the raw fields.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>
#include "control.h"

struct Point {
    int x, y;
};

__attribute__((noinline)) size_t take_string(const std::string &s) { return s.size(); }
__attribute__((noinline)) int take_vector(const std::vector<int> &v) {
    int total = 0;
    for (int x : v) total += x;
    return total;
}
__attribute__((noinline)) size_t take_words(const std::vector<std::string> &words) { return words.size(); }
__attribute__((noinline)) int take_unique(const std::unique_ptr<Point> &p) { return p->x + p->y; }
__attribute__((noinline)) long take_shared(const std::shared_ptr<Point> &p) { return p.use_count() + p->x; }
__attribute__((noinline)) int take_map(const std::map<std::string, int> &m) {
    int total = 0;
    for (const auto &kv : m) total += kv.second;
    return total;
}
__attribute__((noinline)) size_t take_big(const std::vector<long> &v, const std::string &s) { return v.size() + s.size(); }
__attribute__((noinline)) std::string make_string(int n) { return std::string(n, 'z') + "!"; }

int main(int argc, char **argv) {
    if (argc > 1) control = argv[1];
    int once = argc > 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    std::vector<long> big(5000);
    for (long i = 0; i < 5000; i++) big[i] = i * 3;
    std::string huge(5000, 'y');
    printf("ready\n");
    size_t total = 0;
    for (int round = 1; round <= (once ? 1 : 1000); round++) {
        char name[32];
        snprintf(name, sizeof name, "round-%d", round);
        while (!once && !exists(name)) usleep(2000);
        std::string text = "a std::string longer than fifteen chars";
        std::string small = "short";
        std::vector<int> numbers = {4, -8, 15, 16, 23, 42};
        std::vector<std::string> words = {"one", "two", "a third word that is not short"};
        auto unique = std::make_unique<Point>(Point{3, 4});
        auto shared = std::make_shared<Point>(Point{-1, 9});
        auto other = shared;
        std::map<std::string, int> ages = {{"ann", 31}, {"bob", 27}, {"cid", 45}, {"dee", 19}};
        total += take_string(text);
        total += take_string(small);
        total += take_vector(numbers);
        total += take_words(words);
        total += take_unique(unique);
        total += take_shared(shared);
        total += take_map(ages);
        total += take_big(big, huge);
        total += make_string(4).size();
        printf("round %d done\n", round);
    }
    return total == 0;
}
