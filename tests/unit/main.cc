// The unit-test runner: every tests/unit/*_test.cc links into this one doctest binary.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
