// tests/catch_main.cpp — Catch2's main, alone in its translation unit (slow to compile).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
