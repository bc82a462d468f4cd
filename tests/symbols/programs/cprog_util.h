#ifndef CPROG_UTIL_H
#define CPROG_UTIL_H

int util_scale(int value, int factor);
int util_check(int v);

static inline int util_clamp(int v) /* LINE util_clamp */
{
    return v < 0 ? 0 : v;
}

#endif
