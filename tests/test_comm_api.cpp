// The Comm API the thread Team shares with the MPI Team
// (runtime/communicator.hpp): reduce_scatter with unequal counts (as the MPI
// Comm's, padded to the largest block), and the accessors.

#include <catch2/catch.hpp>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/comm.hpp"
#include "tests/comm_threads.hpp"

using namespace copse;
using namespace copse::testing;

namespace {

using Bytes = std::vector<std::byte>;

// Rank r's reduce_scatter result for blocks of base + v % 3 elements (rank
// v's), compared against the sequential reference of the whole vector; the
// number of ranks whose result differs.
int unequal_reduce_scatter(Team& team, const ReduceOp& op, int base, bool in_place) {
  const int p = team.size();
  std::vector<int> counts;
  std::vector<std::size_t> at;
  std::size_t total = 0;
  for (int v = 0; v < p; ++v) {
    counts.push_back(base + v % 3);
    at.push_back(total);
    total += static_cast<std::size_t>(counts.back());
  }
  const std::size_t eb = op.element_bytes;
  const Bytes all = reference_result(op, p, total);
  std::vector<int> bad(static_cast<std::size_t>(p), 0);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    const auto r = static_cast<std::size_t>(c.rank());
    Bytes x(total * eb + 1), y(static_cast<std::size_t>(counts[r]) * eb + 1, std::byte{0xA5});
    fill_input(op, c.rank(), total, x.data());
    if (in_place)
      c.reduce_scatter(x.data(), x.data(), counts.data(), op);
    else
      c.reduce_scatter(x.data(), y.data(), counts.data(), op);
    const std::byte* got = in_place ? x.data() : y.data();
    const std::size_t bytes = static_cast<std::size_t>(counts[r]) * eb;
    if (bytes > 0 && std::memcmp(got, all.data() + at[r] * eb, bytes) != 0) bad[r] = 1;
  }));
  int wrong = 0;
  for (int b : bad) wrong += b;
  return wrong;
}

}  // namespace

TEST_CASE("thread Comm: reduce_scatter with unequal counts matches the reference", "[comm]") {
  for (const std::vector<int>& layout : {std::vector<int>{4}, std::vector<int>{2, 3}}) {
    Team team(options_for(layout));
    for (const ReduceOp& op : {builtin_op("sum", DType::int32), builtin_op("affine", DType::uint64)})
      for (int base : {0, 1, 700})
        for (bool in_place : {false, true}) {
          INFO(team.size() << " ranks, " << op.name << ", base " << base << (in_place ? ", in place" : ""));
          CHECK(unequal_reduce_scatter(team, op, base, in_place) == 0);
        }
  }
}

TEST_CASE("thread Comm: reduce_scatter refuses a negative count", "[comm]") {
  Team team(options_for({2}));
  const std::vector<int> counts{3, -1};
  const ReduceOp sum = builtin_op("sum", DType::int32);
  std::vector<int> x(8), y(8);
  CHECK_THROWS_AS(team.comm(0).reduce_scatter(x.data(), y.data(), counts.data(), sum), UsageError);
}

TEST_CASE("thread Comm: the accessors the MPI Comm has", "[comm]") {
  TeamOptions options = options_for({2, 2});
  options.virtual_clock = true;
  Team team(options);
  CHECK(team.layout().ranks() == 4);
  CHECK(team.layout().nodes() == 2);
  const ReduceOp sum = builtin_op("sum", DType::float64);
  std::vector<std::size_t> plans(4);
  std::vector<Picos> times(4);
  check_no_errors(on_every_rank(team, [&](Comm& c) {
    std::vector<double> x(64, 1.0);
    c.allreduce(x.data(), x.data(), x.size(), sum);
    c.bcast(x.data(), x.size(), DType::float64, 1);
    c.allreduce(x.data(), x.data(), x.size(), sum);  // the same call: no new plan
    plans[static_cast<std::size_t>(c.rank())] = c.cached_plans();
    times[static_cast<std::size_t>(c.rank())] = c.virtual_time();
  }));
  CHECK(plans == std::vector<std::size_t>(4, 2));
  for (Picos t : times) CHECK(t > 0);
}
