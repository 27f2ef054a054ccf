// The doctest runner for the treesync suite: the one translation unit that defines main().
// Every tests/test_*.cpp just includes <doctest/doctest.h>; the list of them is tests/test_sources.txt.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
