/* A small program with a bug, for the demo: the stock value is off and the program says so on stderr.
 * (The loop in stock_value runs one element too far and counts the template row.) */
#include <stdio.h>

struct item {
    const char *name;
    int quantity;
    double unit_price;
};

/* The first `count` rows are real stock; the last row is a template for new items. */
static struct item inventory[] = {
    {"bolt", 120, 0.25},
    {"nut", 200, 0.10},
    {"washer", 75, 0.05},
    {"bracket", 10, 4.50},
    {"TEMPLATE", 999, 1.00},
};
static const int count = 4;
static const double ledger_value = 98.75;

static double line_value(const struct item *row) {
    return row->quantity * row->unit_price;
}

static double stock_value(const struct item *items, int n) {
    double total = 0.0;
    for (int i = 0; i <= n; i++) {
        total += line_value(&items[i]);
    }
    return total;
}

int main(void) {
    printf("inventory: %d items\n", count);
    for (int i = 0; i < count; i++) {
        printf("  %-8s x%-4d @ %.2f\n", inventory[i].name, inventory[i].quantity, inventory[i].unit_price);
    }
    double value = stock_value(inventory, count);
    printf("stock value: %.2f\n", value);
    if (value != ledger_value) {
        fprintf(stderr, "error: stock value %.2f does not match the ledger (%.2f): off by %.2f\n", value,
                ledger_value, value - ledger_value);
        return 2;
    }
    return 0;
}
