// Catch2's runner for every Catch2 program (copse_tests, pmpi_options_tests),
// with the test programs' heap policy (tests/heap_policy.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/heap_policy.hpp"

int main(int argc, char** argv) {
  copse::testing::keep_freed_memory();
  return Catch::Session().run(argc, argv);
}
