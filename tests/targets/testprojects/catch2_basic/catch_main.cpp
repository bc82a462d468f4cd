// Catch2's implementation and main(), compiled once.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
