/* A shared library with debug info, loaded by uses_lib.c through DT_NEEDED. */
__attribute__((noinline)) int lib_scale(int value, int factor) { return value * factor; }
