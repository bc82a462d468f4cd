#include "cxxprog_geo.h"

int box_total(int n) // LINE box_total
{
    geo::Box<int> b{n};
    return b.get() + (b < b ? 1 : 0);
}
