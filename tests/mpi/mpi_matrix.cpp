// copse_mpi_tests's matrix: one check per entry point against the
// sequential reference (sum, max and a non-commutative user operator;
// int32, int64, float, double; in place and not; roots cycling; scatter,
// gather and alltoall), the
// matrices that run them at every count, vectors of over 2^20 elements,
// bitwise identical float allreduce and the plan cache. test_mpi_comm.cpp
// runs them on each communicator and mode.

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "mpi_checks.hpp"
#include "transport/direct_reduce.hpp"

namespace mpi_tests {

using copse::DirectReduce;

namespace {

// ---- operators --------------------------------------------------------------------

// The non-commutative operator, as an application would write it: affine
// maps x -> a*x + b as pairs (a, b), composed "first, then second" with
// wrap-around integer arithmetic. Named "affine" so that fill_input gives it
// the inputs whose reference is exact.
template <class T>
ReduceOp affine_user_op(DType dtype) {
  return user_op("affine", dtype, false, 2 * sizeof(T), [](const void* a, void* b, std::size_t n) {
    using U = std::make_unsigned_t<T>;
    const T* x = static_cast<const T*>(a);
    T* y = static_cast<T*>(b);
    for (std::size_t i = 0; i < n; ++i) {
      const U a1 = static_cast<U>(x[2 * i]), b1 = static_cast<U>(x[2 * i + 1]);
      const U a2 = static_cast<U>(y[2 * i]), b2 = static_cast<U>(y[2 * i + 1]);
      y[2 * i] = static_cast<T>(static_cast<U>(a1 * a2));
      y[2 * i + 1] = static_cast<T>(static_cast<U>(a2 * b1 + b2));
    }
  });
}

struct OpCase {
  const char* name;
  DType dtype;
};

ReduceOp make_op(const OpCase& c) {
  if (std::strcmp(c.name, "affine") == 0)
    return c.dtype == DType::int32 ? affine_user_op<std::int32_t>(c.dtype) : affine_user_op<std::int64_t>(c.dtype);
  return builtin_op(c.name, c.dtype);
}

const OpCase kOps[] = {{"sum", DType::int32},   {"sum", DType::int64},   {"sum", DType::float32},
                       {"sum", DType::float64}, {"max", DType::int32},   {"max", DType::int64},
                       {"max", DType::float32}, {"max", DType::float64}, {"affine", DType::int32},
                       {"affine", DType::int64}};
const DType kTypes[] = {DType::int32, DType::int64, DType::float32, DType::float64};

// ---- data ---------------------------------------------------------------------------

Bytes poison(std::size_t bytes) { return Bytes(bytes, std::byte{0xA5}); }

ReduceOp data_op(DType t) { return builtin_op("max", t); }  // only for fill_input's data

// First differing element, for the message.
void compare(const Comm& c, const std::string& what, const std::byte* got, const std::byte* want, std::size_t bytes,
             std::size_t eb) {
  ++g_checks;
  if (bytes == 0 || std::memcmp(got, want, bytes) == 0) return;
  std::size_t e = 0;
  while (std::memcmp(got + e * eb, want + e * eb, eb) == 0) ++e;
  fail(where(c, what) + ": wrong at element " + std::to_string(e));
}

std::string label(const char* collective, const ReduceOp& op, std::uint64_t n, bool in_place, int root = -1) {
  std::ostringstream m;
  m << collective << " " << op.name << " " << to_string(op.dtype) << " n=" << n << (in_place ? " in place" : "");
  if (root >= 0) m << " root " << root;
  return m.str();
}
}  // namespace

// ---- one check per entry point ------------------------------------------------------

const Bytes& reference(const ReduceOp& op, int p, std::uint64_t n) {
  using Key = std::tuple<std::string, DType, std::size_t, std::string, int, std::uint64_t>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<const Bytes>> done;  // node-based: references stay put
  Key key{op.name, op.dtype, op.element_bytes, op.combine.target_type().name(), p, n};
  const std::lock_guard lock(mutex);
  auto& slot = done[std::move(key)];
  if (!slot) slot = std::make_unique<const Bytes>(copse::reference_result(op, p, n));
  return *slot;
}

void check_allreduce(Comm& c, const ReduceOp& op, std::uint64_t n, bool in_place) {
  const std::size_t bytes = static_cast<std::size_t>(n * op.element_bytes);
  Bytes x = input(op, c.rank(), n), y = poison(bytes);
  if (in_place)
    c.allreduce(x.data(), x.data(), n, op);
  else
    c.allreduce(x.data(), y.data(), n, op);
  const Bytes& want = reference(op, c.size(), n);
  compare(c, label("allreduce", op, n, in_place), (in_place ? x : y).data(), want.data(), bytes, op.element_bytes);
}

namespace {

void check_reduce(Comm& c, const ReduceOp& op, std::uint64_t n, int root, bool in_place) {
  const std::size_t bytes = static_cast<std::size_t>(n * op.element_bytes);
  Bytes x = input(op, c.rank(), n), y = poison(bytes);
  const bool here = in_place && c.rank() == root;  // MPI: in place at the root only
  c.reduce(x.data(), here ? x.data() : (c.rank() == root ? y.data() : nullptr), n, op, root);
  if (c.rank() != root) return;
  const Bytes& want = reference(op, c.size(), n);
  compare(c, label("reduce", op, n, here, root), (here ? x : y).data(), want.data(), bytes, op.element_bytes);
}

void check_bcast(Comm& c, DType t, std::uint64_t n, int root) {
  const ReduceOp op = data_op(t);
  const Bytes want = input(op, root, n);
  Bytes x = c.rank() == root ? want : poison(want.size());
  c.bcast(x.data(), n, t, root);
  compare(c, label("bcast", op, n, false, root), x.data(), want.data(), want.size(), op.element_bytes);
}

void check_allgather(Comm& c, DType t, std::uint64_t n, bool in_place) {
  const ReduceOp op = data_op(t);
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  const auto p = static_cast<std::size_t>(c.size());
  Bytes want;
  for (int r = 0; r < c.size(); ++r) {
    const Bytes x = input(op, r, n);
    want.insert(want.end(), x.begin(), x.end());
  }
  Bytes y = poison(p * block);
  const Bytes mine = input(op, c.rank(), n);
  if (in_place) {
    std::copy(mine.begin(), mine.end(),
              y.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c.rank()) * block));
    c.allgather(y.data(), y.data(), n, t);
  } else {
    c.allgather(mine.data(), y.data(), n, t);
  }
  compare(c, label("allgather", op, n, in_place), y.data(), want.data(), want.size(), op.element_bytes);
}

void check_reduce_scatter_block(Comm& c, const ReduceOp& op, std::uint64_t n, bool in_place) {
  const auto p = static_cast<std::uint64_t>(c.size());
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  Bytes x = input(op, c.rank(), p * n), y = poison(block);
  if (in_place)
    c.reduce_scatter_block(x.data(), x.data(), n, op);
  else
    c.reduce_scatter_block(x.data(), y.data(), n, op);
  const Bytes& all = reference(op, c.size(), p * n);
  compare(c, label("reduce_scatter_block", op, n, in_place), (in_place ? x : y).data(),
          all.data() + static_cast<std::size_t>(c.rank()) * block, block, op.element_bytes);
}

// Blocks of base, base+1, base+2, base, ... elements (and none for rank 1
// when base is 0).
void check_reduce_scatter(Comm& c, const ReduceOp& op, std::uint64_t base, bool in_place) {
  const int p = c.size();
  std::vector<int> counts;
  std::uint64_t total = 0, mine_at = 0;
  for (int v = 0; v < p; ++v) {
    counts.push_back(static_cast<int>(base + static_cast<std::uint64_t>(v % 3)));
    if (v == c.rank()) mine_at = total;
    total += static_cast<std::uint64_t>(counts.back());
  }
  const std::size_t eb = op.element_bytes;
  const std::size_t mine = static_cast<std::size_t>(counts[static_cast<std::size_t>(c.rank())]) * eb;
  Bytes x = input(op, c.rank(), total), y = poison(mine);
  if (in_place)
    c.reduce_scatter(x.data(), x.data(), counts.data(), op);
  else
    c.reduce_scatter(x.data(), y.data(), counts.data(), op);
  const Bytes& all = reference(op, p, total);
  compare(c, label("reduce_scatter", op, base, in_place), (in_place ? x : y).data(),
          all.data() + static_cast<std::size_t>(mine_at) * eb, mine, eb);
}

// Scatter of rank root's p blocks (its input over p * n elements); off the
// root send is null, as MPI leaves it insignificant. In place at the root:
// its send is left as it was.
void check_scatter(Comm& c, DType t, std::uint64_t n, int root, bool in_place) {
  const ReduceOp op = data_op(t);
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  const auto p = static_cast<std::uint64_t>(c.size());
  const Bytes all = input(op, root, p * n);
  const bool at_root = c.rank() == root, here = in_place && at_root;
  Bytes send = at_root ? all : Bytes(), y = poison(block);
  c.scatter(at_root ? send.data() : nullptr, here ? send.data() : y.data(), n, t, root);
  if (here)
    compare(c, label("scatter", op, n, true, root), send.data(), all.data(), all.size(), op.element_bytes);
  else
    compare(c, label("scatter", op, n, false, root), y.data(), all.data() + static_cast<std::size_t>(c.rank()) * block,
            block, op.element_bytes);
}

// Gather of every rank's input to the root; off the root recv is null. In
// place at the root: its block is already in recv.
void check_gather(Comm& c, DType t, std::uint64_t n, int root, bool in_place) {
  const ReduceOp op = data_op(t);
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  Bytes want;
  for (int r = 0; r < c.size(); ++r) {
    const Bytes x = input(op, r, n);
    want.insert(want.end(), x.begin(), x.end());
  }
  const Bytes mine = input(op, c.rank(), n);
  const bool at_root = c.rank() == root, here = in_place && at_root;
  Bytes y = poison(want.size());
  if (here) {
    std::copy(mine.begin(), mine.end(),
              y.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(root) * block));
    c.gather(y.data(), y.data(), n, t, root);
  } else {
    c.gather(mine.data(), at_root ? y.data() : nullptr, n, t, root);
  }
  if (at_root) compare(c, label("gather", op, n, here, root), y.data(), want.data(), want.size(), op.element_bytes);
}

// Alltoall: rank s's input over p * n elements holds its block for rank d
// at d * n; rank r receives block r of everyone's.
void check_alltoall(Comm& c, DType t, std::uint64_t n, bool in_place) {
  const ReduceOp op = data_op(t);
  const std::size_t block = static_cast<std::size_t>(n * op.element_bytes);
  const auto p = static_cast<std::uint64_t>(c.size());
  const auto mine_at = static_cast<std::ptrdiff_t>(static_cast<std::size_t>(c.rank()) * block);
  Bytes want;
  for (int s = 0; s < c.size(); ++s) {
    const Bytes x = input(op, s, p * n);
    want.insert(want.end(), x.begin() + mine_at, x.begin() + mine_at + static_cast<std::ptrdiff_t>(block));
  }
  Bytes x = input(op, c.rank(), p * n), y = poison(x.size());
  c.alltoall(x.data(), in_place ? x.data() : y.data(), n, t);
  compare(c, label("alltoall", op, n, in_place), (in_place ? x : y).data(), want.data(), want.size(), op.element_bytes);
}

// Nobody leaves the barrier before the last rank (which comes 30 ms late)
// has entered it. steady_clock is CLOCK_MONOTONIC, one clock for the host.
void check_barrier(Comm& c) {
  using Clock = std::chrono::steady_clock;
  const int late = c.size() - 1;
  if (c.rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::int64_t entered = Clock::now().time_since_epoch().count();
  c.barrier();
  const std::int64_t left = Clock::now().time_since_epoch().count();
  c.bcast(&entered, 1, DType::int64, late);
  expect(left >= entered, where(c, "barrier: left before the last rank entered"));
}

}  // namespace

// ---- the matrix -------------------------------------------------------------------------

// Every entry point at every count with every operator and type (reductions)
// or type (data movement), in place on alternate calls, roots cycling.
// `small` trims it to a few operators for the sub-communicators.
void run_matrix(Comm& c, bool small) {
  const int p = c.size();
  const std::uint64_t counts[] = {0, 1, static_cast<std::uint64_t>(p - 1), static_cast<std::uint64_t>(p + 1), 1000};
  int i = 0;
  for (std::uint64_t n : counts)
    for (const OpCase& oc : kOps) {
      if (small && std::strcmp(oc.name, "affine") != 0 && oc.dtype != DType::float64 && n != 1) continue;
      const ReduceOp op = make_op(oc);
      const bool in_place = (i++ % 2) != 0;
      const int root = (i * 5 + 1) % p;
      guarded(c, "matrix", [&] {
        check_allreduce(c, op, n, in_place);
        check_reduce(c, op, n, root, !in_place);
        check_reduce_scatter_block(c, op, n, in_place);
        check_reduce_scatter(c, op, n, !in_place);
      });
    }
  for (std::uint64_t n : counts)
    for (DType t : kTypes) {
      if (small && t != DType::int64) continue;
      const int root = (i++ * 3 + 2) % p;
      guarded(c, "matrix", [&] {
        check_bcast(c, t, n, root);
        check_allgather(c, t, n, (i % 2) != 0);
        check_scatter(c, t, n, root, (i % 2) == 0);
        check_gather(c, t, n, (root + 1) % p, (i % 2) != 0);
        check_alltoall(c, t, n, (i % 2) == 0);
      });
    }
  guarded(c, "barrier", [&] { check_barrier(c); });
}

// Vectors of over 2^20 elements (pieces of a 4 MiB window), once per entry
// point: 2^20+3 elements for allreduce, reduce and bcast; blocks of
// 2^20/p+3 for allgather and the reduce-scatters, whose vectors hold p blocks;
// blocks of 2^18+3 int32 (just over 2^20 bytes) for scatter, gather and
// alltoall (their vectors of p and 2p blocks run in pieces).
void run_large(Comm& c, bool moving) {
  const std::uint64_t n = (std::uint64_t{1} << 20) + 3;
  const int p = c.size();
  const std::uint64_t block = (std::uint64_t{1} << 20) / static_cast<std::uint64_t>(p) + 3;
  guarded(c, "large", [&] {
    check_allreduce(c, builtin_op("sum", DType::float32), n, true);
    check_reduce(c, make_op({"affine", DType::int32}), n, p - 1, false);
    check_bcast(c, DType::float64, n, p / 2);
    check_allgather(c, DType::int32, block, false);
    check_reduce_scatter_block(c, builtin_op("max", DType::int64), block, true);
    check_reduce_scatter(c, builtin_op("sum", DType::int32), block, false);
    // Scatter, gather and alltoall over 2^20 bytes a block, when asked and
    // at two shapes only (one node of 2, and 5 on nodes of 3 or one node):
    // the budget.
    if (!moving || (p != 2 && p != 5)) return;
    const std::uint64_t big = (std::uint64_t{1} << 18) + 3;  // int32
    check_scatter(c, DType::int32, big, p - 1, false);
    check_gather(c, DType::int32, big, p / 2, true);
    check_alltoall(c, DType::int32, big, false);
  });
}

// Random, inexact floats: every rank must end with the same bits.
void check_bitwise(Comm& c) {
  guarded(c, "bitwise", [&] {
    for (std::uint64_t n : {std::uint64_t{1000}, std::uint64_t{70001}}) {
      std::mt19937 rng(1234U + static_cast<unsigned>(c.rank()));
      std::uniform_real_distribution<float> value(-1.0F, 1.0F);
      std::vector<float> x(n);
      for (float& v : x) v = value(rng) * 1e3F;
      c.allreduce(x.data(), x.data(), n, builtin_op("sum", DType::float32));
      std::uint64_t hash = 1469598103934665603ULL;
      for (float v : x) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, &v, 4);
        hash = (hash ^ bits) * 1099511628211ULL;
      }
      std::vector<std::uint64_t> all(static_cast<std::size_t>(c.size()));
      c.allgather(&hash, all.data(), 1, DType::uint64);
      for (std::uint64_t h : all) expect(h == hash, where(c, "float allreduce not bitwise identical on every rank"));
    }
  });
}

// The same shapes again hit the cache; more shapes than it holds evict.
// (Vectors past the direct reduce's slots: smaller ones on one node are
// not schedules, and plan nothing.)
void check_plan_cache(Comm& c) {
  guarded(c, "plan cache", [&] {
    const ReduceOp op = builtin_op("sum", DType::int32);
    const std::uint64_t first = DirectReduce::kSlotBytes / sizeof(std::int32_t) + 1;
    for (int round = 0; round < 2; ++round)
      for (std::uint64_t n = first; n < first + 10; ++n) check_allreduce(c, op, n, false);
    expect(c.cached_plans() == 4,
           where(c, "the plan cache holds " + std::to_string(c.cached_plans()) + " shapes, not 4"));
    check_allreduce(c, op, first + 9, true);
    expect(c.cached_plans() == 4, where(c, "a cached shape changed the cache's size"));
  });
}

}  // namespace mpi_tests
