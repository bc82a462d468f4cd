/* Paused-frames target (usage: frames CONTROL_DIR): a call chain of three functions with locals. Prints "ready",
 * waits for CONTROL_DIR/go, then checkout(7) -> price_cart(items, 3) -> apply_discount(120, 10) -> at_least(108, 0)
 * and prints "order 7 total 108" (3 pens at 10, 2 books at 25, 1 bag at 40: 120, less 10%); exits when
 * CONTROL_DIR/quit exists. */
#include <stdio.h>
#include <unistd.h>
#include "control.h"

struct item {
    const char *name;
    int price;
    int qty;
};

__attribute__((noinline)) int at_least(int value, int low) {
    return value < low ? low : value;
}

__attribute__((noinline)) int apply_discount(int subtotal, int percent) {
    int discount = subtotal * percent / 100;
    int discounted = at_least(subtotal - discount, 0);
    return discounted;
}

__attribute__((noinline)) int price_cart(const struct item *items, int count) {
    int subtotal = 0;
    for (int i = 0; i < count; i++) {
        subtotal += items[i].price * items[i].qty;
    }
    int percent = subtotal > 100 ? 10 : 0;
    int total = apply_discount(subtotal, percent);
    return total;
}

__attribute__((noinline)) int checkout(int order_id) {
    struct item items[3] = {{"pen", 10, 3}, {"book", 25, 2}, {"bag", 40, 1}};
    int count = 3;
    int total = price_cart(items, count);
    printf("order %d total %d\n", order_id, total);
    fflush(stdout);
    return total;
}

int main(int argc, char **argv) {
    control = argc > 1 ? argv[1] : ".";
    printf("ready\n");
    fflush(stdout);
    while (!exists("go")) usleep(1000);
    checkout(7);
    while (!exists("quit")) usleep(1000);
    return 0;
}
