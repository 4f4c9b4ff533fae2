// What the two files of copse_mpi_tests share: test_mpi_comm.cpp (the
// modes, the failure and timing cases, main) and mpi_matrix.cpp (one check
// per entry point against the sequential reference, and the matrices that
// run them). The tally of checks and failures, the helpers both use, and the
// matrix entry points the modes call.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/mpi_comm.hpp"

namespace mpi_tests {

// Not `using namespace copse`: copse::Team (threads) would clash with copse::mpi::Team.
using copse::builtin_op;
using copse::DType;
using copse::Error;
using copse::ErrorKind;
using copse::fill_input;
using copse::ReduceOp;
using copse::to_string;
using copse::UsageError;
using copse::user_op;
using copse::mpi::Comm;
using copse::mpi::CommOptions;
using copse::mpi::Team;

inline int g_world = 0;  // this process's rank in MPI_COMM_WORLD
inline std::atomic<long> g_checks{0};
inline std::atomic<long> g_failures{0};

inline void fail(const std::string& what) {
  ++g_failures;
  std::fprintf(stderr, "FAIL (MPI rank %d): %s\n", g_world, what.c_str());
}

inline void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) fail(what);
}

using Bytes = std::vector<std::byte>;

// Rank `rank`'s input of n elements, the one reference_result expects.
inline Bytes input(const ReduceOp& op, int rank, std::uint64_t n) {
  Bytes x(static_cast<std::size_t>(n * op.element_bytes));
  fill_input(op, rank, n, x.data());
  return x;
}

// reference_result(op, p, n), computed once per process for each operator
// (name, type, element size and kind of function), p and n: the matrix asks
// for the same references on the world, its sub-communicators and again with
// every plan cached, and each costs p fills of n elements (over 2^20 in
// run_large, a tenth of a test's CPU before). Threads of the hybrid mode may
// ask at once.
const Bytes& reference(const ReduceOp& op, int p, std::uint64_t n);

inline std::string where(const Comm& c, const std::string& what) {
  return what + " on rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size());
}

// f(), an exception from it reported as a failure, so that the run goes on.
template <class F>
void guarded(Comm& c, const std::string& what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    fail(where(c, what) + ": " + e.what());
  }
}

// ---- mpi_matrix.cpp ------------------------------------------------------------------

// One allreduce of n elements checked against the reference.
void check_allreduce(Comm& c, const ReduceOp& op, std::uint64_t n, bool in_place);
// Every entry point at every count with every operator and type; `small`
// trims it to a few operators.
void run_matrix(Comm& c, bool small);
// Each entry point once on vectors of over 2^20 elements (scatter, gather
// and alltoall when `moving`, at p = 2 and 5 only).
void run_large(Comm& c, bool moving = true);
// Random, inexact floats: every rank must end with the same bits.
void check_bitwise(Comm& c);
// Repeated shapes hit the plan cache and more than it holds evict (a cache of 4).
void check_plan_cache(Comm& c);
// The v-variants against the reference (tests/mpi/mpi_vector.cpp); blocks
// over 2^20 bytes too when `large`.
void run_vector(Comm& c, bool large);

}  // namespace mpi_tests
