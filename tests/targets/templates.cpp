// A C++ target for patterns over templates (usage: templates CONTROL_DIR). Each time CONTROL_DIR/round-N
// appears it runs one round and prints "round N done"; CONTROL_DIR/quit ends it. Per round:
//   app::Printer<int>::print_all<double>, app::Printer<int>::print_all<const char*>,
//   app::Printer<std::string>::print_all<int>   (one member template of a class template, three instantiations)
//   app::print_all_items (not a print_all); app::Stack<int>::push(int) twice, app::Stack<double>::push(double);
//   app::Stack<int>::operator<, app::operator<< (a Stack<int>), app::Stack<int>::operator->, app::Stack<int>::operator().
#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace app {

template <typename W>
struct Printer {
    W label;

    template <typename X>
    __attribute__((noinline)) int print_all(const std::vector<X> &items) const {
        for (const X &item : items) std::cout << label << ": " << item << "\n";
        return static_cast<int>(items.size());
    }
};

__attribute__((noinline)) int print_all_items(const std::vector<int> &items) {
    std::cout << "items " << items.size() << "\n";
    return static_cast<int>(items.size());
}

template <typename T>
struct Stack {
    std::vector<T> items;
    __attribute__((noinline)) void push(T item) { items.push_back(item); }
    __attribute__((noinline)) bool operator<(const Stack &other) const { return items.size() < other.items.size(); }
    __attribute__((noinline)) const std::vector<T> *operator->() const { return &items; }
    __attribute__((noinline)) T operator()(std::size_t i) const { return items[i]; }
};

template <typename T>
__attribute__((noinline)) std::ostream &operator<<(std::ostream &out, const Stack<T> &stack) {
    return out << "stack of " << stack.items.size();
}

}  // namespace app

static bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

int main(int argc, char **argv) {
    std::string control = argc > 1 ? argv[1] : ".";
    app::Printer<int> numbers{42};
    app::Printer<std::string> named{"named"};
    std::printf("ready\n");
    std::fflush(stdout);
    for (int round = 1;; round++) {
        std::string next = control + "/round-" + std::to_string(round);
        while (!exists(next)) {
            if (exists(control + "/quit")) return 0;
            struct timespec pause = {0, 5000000};
            nanosleep(&pause, nullptr);
        }
        numbers.print_all(std::vector<double>{1.5, 2.5});
        numbers.print_all(std::vector<const char *>{"a"});
        named.print_all(std::vector<int>{7, 8, 9});
        app::print_all_items({1, 2});
        app::Stack<int> ints;
        ints.push(1);
        ints.push(2);
        app::Stack<double> doubles;
        doubles.push(0.5);
        app::Stack<int> empty;
        bool smaller = empty < ints;
        std::cout << ints << " " << smaller << " " << ints->size() << " " << ints(1) << "\n";
        std::printf("round %d done\n", round);
        std::fflush(stdout);
    }
}
