#pragma once
// The calling thread's allocations so far: every global operator new of the
// copse_tests binary, counted per thread (test_comm.cpp replaces them, and
// says why they are counted so). A rank's thread reads it before and after
// what must not allocate.

#include <cstdint>

namespace copse::testing {

std::uint64_t allocations_on_this_thread();

}  // namespace copse::testing
