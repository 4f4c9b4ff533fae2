// Bitwise agreement on inexact floating point (issue 6, item 5).
//
// Every other test feeds exact small integers (fill_input), for which any
// association of the reduction gives the same bits: a schedule in which
// different ranks reduce in different association would pass them all, yet
// hand a real application's ranks results that differ in their last bits
// (and so let them diverge). Here the inputs are random floats and doubles --
// spread over forty binades with both signs for sum, scattered around 1 for
// prod -- so that a different association changes the bits of a sizeable
// fraction of the elements, and every rank's allreduce result must be
// bitwise identical to rank 0's:
//   - every registered allreduce algorithm's own schedule, over rank counts
//     around powers of two and primes, element counts 1, p - 1, p + 1, 1000
//     and 4099, block counts 1, 2, 7 where it pipelines;
//   - every one in a hierarchy (plan_hierarchical) over a single node and
//     uneven clusters of synthetic nodes, groupings auto, size:2, size:3,
//     with and without multi-leader;
//   - every one through the user-facing Team/Comm, in place and not.
// Each result must also lie within the rigorous error bound of any
// association of the sum (product) around a long double reference, so that
// garbage produced identically on every rank cannot pass.
//
// The test of the test: a hand-written three-rank allreduce in which rank 2
// computes x0 ⊙ (x1 ⊙ x2) while ranks 0 and 1 get (x0 ⊙ x1) ⊙ x2. Rank order
// is kept, so the verifier proves it and the exact-integer emulation
// verifies it; the same check that every real algorithm passes rejects it.
//
// Schedules run on real data through the link engine itself (a HeapArena,
// one thread per rank), as the emulator and Comm run them; the runs of one
// rank count and hierarchy share their threads. Catch2's assertions are not
// thread-safe: rank threads only record, the main thread checks.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <iomanip>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "emulator/emulator.hpp"
#include "emulator/rank_fibers.hpp"
#include "exec/step_executor.hpp"
#include "plan/hierarchical.hpp"
#include "runtime/comm.hpp"
#include "tests/comm_threads.hpp"
#include "tests/support.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"

using namespace copse;

namespace {

using Bytes = std::vector<std::byte>;

// ---- inputs ---------------------------------------------------------------

// with_dtype for the two floating types this file is about.
template <class F>
decltype(auto) with_floating(DType t, F&& f) {
  if (t == DType::float32) return f(float{});
  if (t != DType::float64) throw UsageError("bitwise agreement tests use float and double only");
  return f(double{});
}

// Random inexact values for `op` (sum or prod, float32 or float64), one
// vector per rank, reproducible from `seed`. Sum: ±m·2^k with m uniform in
// [1, 2) and k in [-20, 20], so partial sums round differently in almost any
// other association. Prod: 1 + d with d uniform in (-1/4, 1/4): random
// mantissas whose products stay far from overflow for any p used here.
std::vector<Bytes> random_inputs(const ReduceOp& op, int p, std::uint64_t count, std::uint64_t seed) {
  const bool prod = op.name == "prod";
  std::vector<Bytes> inputs(static_cast<std::size_t>(p), Bytes(static_cast<std::size_t>(count) * op.element_bytes));
  for (int r = 0; r < p; ++r) {
    std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(r));
    std::uniform_real_distribution<double> mantissa(1.0, 2.0), near_one(-0.25, 0.25);
    std::uniform_int_distribution<int> exponent(-20, 20), sign(0, 1);
    with_floating(op.dtype, [&](auto t) {
      using T = decltype(t);
      auto* x = reinterpret_cast<T*>(inputs[static_cast<std::size_t>(r)].data());
      for (std::uint64_t i = 0; i < count; ++i) {
        const double v =
            prod ? 1.0 + near_one(gen) : (sign(gen) ? -1.0 : 1.0) * std::ldexp(mantissa(gen), exponent(gen));
        x[i] = static_cast<T>(v);
      }
    });
  }
  return inputs;
}

// ---- running a schedule on real data -------------------------------------

using copse::testing::message_of;

// One allreduce to run: a plan for p ranks, each rank's input vector
// (`count` elements of op); `data` ends as each rank's result.
struct Job {
  SchedulePlan plan;
  std::uint64_t count = 0;
  ReduceOp op;
  std::vector<Bytes> data;
};

// Runs the jobs one after the other on p rank threads through one link
// engine over a HeapArena, as the emulator and Comm run schedules: each rank
// runs its steps of job 0, then of job 1, ... (links match in program order,
// so consecutive runs need no barrier). Batching keeps thread start-up out of
// the cost of small runs. Link levels follow `node_of` (empty: every rank its
// own node). A failing rank's error is rethrown, not the LinkAborted of the
// ranks it took down with it.
void run_jobs(int p, std::vector<Job>& jobs, const std::vector<int>& node_of = {}) {
  const auto pz = static_cast<std::size_t>(p);
  HeapArena arena;
  LinkEngine engine(arena, LinkEngine::create_shared(arena, p),
                    executor_config(node_of.empty() ? RankMap::uniform(p, 0) : RankMap::from_nodes(node_of),
                                    CostModel(), wait_settings(std::chrono::milliseconds(30000), "job")));
  StepExecutor executor(engine);
  // steps[j][r], scratch[j][r]: job j's steps and staging space for rank r.
  std::vector<std::vector<std::vector<Step>>> steps(jobs.size(), std::vector<std::vector<Step>>(pz));
  std::vector<std::vector<Bytes>> scratch(jobs.size(), std::vector<Bytes>(pz));
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    REQUIRE(jobs[j].data.size() == pz);
    for (int r = 0; r < p; ++r) {
      const auto rz = static_cast<std::size_t>(r);
      REQUIRE(jobs[j].data[rz].size() == jobs[j].count * jobs[j].op.element_bytes);
      const std::uint64_t staging = compile_steps(jobs[j].plan, r, p, jobs[j].count, steps[j][rz]);
      scratch[j][rz].resize(static_cast<std::size_t>(staging) * jobs[j].op.element_bytes);
    }
  }
  // The ranks as the emulator runs them, fibers on one worker (a thread each
  // under the sanitizers): whether ranks agree depends on the schedule and
  // the data, not on how the ranks interleave, and on cores that another
  // test shares a thread per rank spent five times the time waiting. Every
  // buffer outlives every rank: a peer may read a rank's buffer until that
  // rank's step ends, and nothing is freed before threads.wait() returns.
  std::vector<std::exception_ptr> errors(pz);
  const std::function<void(int)> body = [&](int r) {
    const auto rz = static_cast<std::size_t>(r);
    LinkRank c;
    c.rank = r;
    c.clock = RankClock(engine.settings().model.ports());
    try {
      for (std::size_t j = 0; j < jobs.size(); ++j) {
        c.round = static_cast<std::int64_t>(j);
        c.clock.reset();
        executor.run(c, steps[j][rz], jobs[j].data[rz].data(), scratch[j][rz].data(), jobs[j].op);
      }
    } catch (...) {
      errors[rz] = std::current_exception();
    }
  };
  RankThreads threads(1);
  threads.start(p, body);
  threads.wait();
  std::exception_ptr first;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const LinkAborted&) {
      if (!first) first = e;
    } catch (...) {
      std::rethrow_exception(e);
    }
  }
  if (first) std::rethrow_exception(first);
}

// One job on its own: every rank's result.
std::vector<Bytes> run_schedule(const SchedulePlan& plan, int p, std::uint64_t count, const ReduceOp& op,
                                std::vector<Bytes> inputs, const std::vector<int>& node_of = {}) {
  std::vector<Job> jobs{Job{plan, count, op, std::move(inputs)}};
  run_jobs(p, jobs, node_of);
  return std::move(jobs[0].data);
}

// ---- the checks -----------------------------------------------------------

template <class T>
std::string hex_bits(T v) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U bits;
  std::memcpy(&bits, &v, sizeof bits);
  std::ostringstream out;
  out << std::setprecision(std::numeric_limits<T>::max_digits10) << v << " (0x" << std::hex << bits << ")";
  return out.str();
}

std::string element_text(const ReduceOp& op, const Bytes& v, std::uint64_t e) {
  return with_floating(op.dtype, [&](auto t) {
    using T = decltype(t);
    T x;
    std::memcpy(&x, v.data() + e * sizeof(T), sizeof(T));
    return hex_bits(x);
  });
}

// Empty when every rank's result has exactly rank 0's bits; otherwise names
// the first rank and element that differ, and how many elements do. This is
// the check of the whole file: the broken schedule below must fail it.
std::string disagreement(const std::vector<Bytes>& results, const ReduceOp& op) {
  const std::size_t eb = op.element_bytes;
  for (std::size_t r = 1; r < results.size(); ++r) {
    if (results[r] == results[0]) continue;
    const std::uint64_t n = results[0].size() / eb;
    std::uint64_t first = n, differing = 0;
    for (std::uint64_t e = 0; e < n; ++e)
      if (std::memcmp(results[r].data() + e * eb, results[0].data() + e * eb, eb) != 0) {
        if (first == n) first = e;
        ++differing;
      }
    return "rank " + std::to_string(r) + " differs from rank 0 in " + std::to_string(differing) + " of " +
           std::to_string(n) + " elements; first at element " + std::to_string(first) + ": " +
           element_text(op, results[r], first) + " vs " + element_text(op, results[0], first);
  }
  return "";
}

// Empty when every rank's result lies within the error bound of any
// association of the reduction, around a long double sequential reference:
// for a sum of p terms |computed - exact| <= gamma_{p-1} * sum |x_i|, for a
// product |computed - exact| <= gamma_{p-1} * |exact|, gamma_n = n u / (1 - n u)
// with u the unit roundoff; p * epsilon (= 2 p u) exceeds gamma_{p-1} and
// leaves room for the reference's own rounding. Otherwise names the first
// rank and element outside the bound.
std::string inaccuracy(const std::vector<Bytes>& results, const std::vector<Bytes>& inputs, const ReduceOp& op) {
  const bool prod = op.name == "prod";
  return with_floating(op.dtype, [&](auto t) -> std::string {
    using T = decltype(t);
    const std::size_t p = inputs.size();
    const std::uint64_t n = inputs.empty() ? 0 : inputs[0].size() / sizeof(T);
    const long double eps = std::numeric_limits<T>::epsilon();
    for (std::uint64_t e = 0; e < n; ++e) {
      long double exact = prod ? 1.0L : 0.0L, magnitude = 0;
      for (const Bytes& in : inputs) {
        T x;
        std::memcpy(&x, in.data() + e * sizeof(T), sizeof(T));
        if (prod)
          exact *= x;
        else
          exact += x, magnitude += std::fabs(static_cast<long double>(x));
      }
      if (prod) magnitude = std::fabs(exact);
      const long double bound = static_cast<long double>(p) * eps * magnitude;
      for (std::size_t r = 0; r < results.size(); ++r) {
        T got;
        std::memcpy(&got, results[r].data() + e * sizeof(T), sizeof(T));
        if (!(std::fabs(static_cast<long double>(got) - exact) <= bound)) {
          std::ostringstream m;
          m << std::setprecision(21) << "rank " << r << " element " << e << ": " << hex_bits(got) << " is not within "
            << bound << " of the exact " << (prod ? "product " : "sum ") << exact;
          return m.str();
        }
      }
    }
    return "";
  });
}

struct AgreementOutcome {
  std::string disagreement;  // empty: every rank has rank 0's bits
  std::string inaccuracy;    // empty: every result within the error bound
};

// Random inputs from `seed`, `plan` run on them, both checks.
AgreementOutcome run_and_check(const SchedulePlan& plan, int p, std::uint64_t count, const ReduceOp& op,
                               std::uint64_t seed, const std::vector<int>& node_of = {}) {
  const std::vector<Bytes> inputs = random_inputs(op, p, count, seed);
  const std::vector<Bytes> results = run_schedule(plan, p, count, op, inputs, node_of);
  return AgreementOutcome{disagreement(results, op), inaccuracy(results, inputs, op)};
}

// An allreduce to check: what it is (for messages), its plan, its data.
struct AgreementCase {
  std::string label;
  SchedulePlan plan;
  std::uint64_t count = 0;
  ReduceOp op;
  std::uint64_t seed = 0;
};

// The same as run_and_check for many cases at once (one batch of jobs on one
// set of rank threads), requiring agreement and accuracy case by case.
void require_agreement(int p, const std::vector<AgreementCase>& cases, const std::vector<int>& node_of = {}) {
  std::vector<std::vector<Bytes>> inputs;
  std::vector<Job> jobs;
  for (const AgreementCase& c : cases) {
    inputs.push_back(random_inputs(c.op, p, c.count, c.seed));
    jobs.push_back(Job{c.plan, c.count, c.op, inputs.back()});
  }
  try {
    run_jobs(p, jobs, node_of);
  } catch (const std::exception& e) {
    std::string labels;
    for (std::size_t j = 0; j < cases.size(); ++j) labels += "\n  job " + std::to_string(j) + ": " + cases[j].label;
    FAIL(e.what() << labels);
  }
  for (std::size_t j = 0; j < cases.size(); ++j) {
    const AgreementCase& c = cases[j];
    const AgreementOutcome out{disagreement(jobs[j].data, c.op), inaccuracy(jobs[j].data, inputs[j], c.op)};
    INFO(c.label << ", seed " << c.seed << ": " << out.disagreement << out.inaccuracy);
    REQUIRE(out.disagreement.empty());
    REQUIRE(out.inaccuracy.empty());
  }
}

std::vector<const AlgorithmInfo*> allreduce_algorithms() {
  std::vector<const AlgorithmInfo*> out;
  for (const AlgorithmInfo& a : algorithms())
    if (a.collective == Collective::allreduce) out.push_back(&a);
  return out;
}

// 1, p - 1, p + 1 and the larger counts given, without repeats or zero.
std::vector<std::uint64_t> agreement_counts(int p, std::initializer_list<long long> large = {1000, 4099}) {
  std::vector<long long> all{1, p - 1LL, p + 1LL};
  all.insert(all.end(), large);
  std::vector<std::uint64_t> out;
  for (long long c : all)
    if (c > 0 && std::find(out.begin(), out.end(), static_cast<std::uint64_t>(c)) == out.end())
      out.push_back(static_cast<std::uint64_t>(c));
  return out;
}

std::shared_ptr<const HierarchyPlan> make_plan(const std::vector<int>& ranks_per_node, const std::string& grouping,
                                               bool multi_leader) {
  std::vector<NodeSpec> nodes;
  for (int k : ranks_per_node) nodes.push_back(NodeSpec{Machine::synthetic(testing::kCommMachine), k, {}});
  return std::make_shared<const HierarchyPlan>(plan_hierarchy(nodes, Grouping::parse(grouping), multi_leader));
}

std::string layout_text(const std::vector<int>& ranks_per_node) {
  std::string s;
  for (int k : ranks_per_node) s += (s.empty() ? "" : ",") + std::to_string(k);
  return s;
}

// ---- the deliberately broken allreduce --------------------------------------

// Three ranks; every rank ends with x0 ⊙ x1 ⊙ x2 in rank order, but rank 2
// associates differently:
//   step 0: rank 0 sends x0 to 1, which forms x0 ⊙ x1 (left) while sending x1
//           to 2, which forms x1 ⊙ x2 (left) while sending its x2 to 1;
//   step 1: rank 1 takes x2 in, giving (x0 ⊙ x1) ⊙ x2 (right); rank 0 sends
//           x0 to 2, giving x0 ⊙ (x1 ⊙ x2) (left);
//   step 2: rank 1 sends its result to rank 0 (replace).
// (A coroutine takes its parameters by value; a capturing coroutine lambda
// would read its captures through a lambda object that may be gone.)
RankSchedule broken_association_rank(std::uint64_t n, int rank) {
  const auto step = [n](int send_to, int recv_from, Combine combine) {
    Step s;
    if (send_to >= 0) s.send = Transfer{send_to, 0, n};
    if (recv_from >= 0) s.recv = Transfer{recv_from, 0, n};
    s.combine = combine;
    return s;
  };
  constexpr int none = -1;
  Step s;
  switch (rank) {
    case 0:
      co_yield (s = step(1, none, Combine::replace));
      co_yield (s = step(2, none, Combine::replace));
      co_yield (s = step(none, 1, Combine::replace));
      break;
    case 1:
      co_yield (s = step(2, 0, Combine::left));
      co_yield (s = step(none, 2, Combine::right));
      co_yield (s = step(0, none, Combine::replace));
      break;
    case 2:
      co_yield (s = step(1, 1, Combine::left));
      co_yield (s = step(none, 0, Combine::left));
      break;
    default: break;
  }
}

SchedulePlan broken_association_plan(const Shape& shape) {
  return [n = shape.count](int rank) { return broken_association_rank(n, rank); };
}

const AlgorithmInfo kBroken{.collective = Collective::allreduce,
                            .name = "broken-association",
                            .description = "rank 2 associates x0 (x1 x2), ranks 0 and 1 (x0 x1) x2",
                            .needs_commutative = false,
                            .pipelined = false,
                            .plan = broken_association_plan};

}  // namespace

// ---- tests ------------------------------------------------------------------

TEST_CASE("bitwise agreement: the check rejects a schedule whose ranks associate differently", "[bitwise]") {
  for (DType dtype : {DType::float32, DType::float64})
    for (const char* op_name : {"sum", "prod"})
      for (std::uint64_t count : {std::uint64_t{100}, std::uint64_t{1001}}) {
        // A different association changes a random element's bits with
        // probability about 1/6 (sum) to 1/3 (prod) here, so a hundred
        // elements leave no real chance of agreement by luck (the seed is
        // fixed in any case).
        const ReduceOp op = builtin_op(op_name, dtype);
        const Shape shape{3, count, 1, 0};
        INFO(to_string(dtype) << " " << op_name << ", " << count << " elements");
        // (a) Symbolically it is a correct allreduce: rank order is respected.
        const VerifyResult proof = verify(kBroken, shape);
        INFO(proof.message);
        REQUIRE(proof.proven);
        // (b) On the exact inputs every other test uses it passes, in the
        // emulator against the sequential reference and under this file's
        // agreement check alike.
        EmulatorConfig config;
        config.layout = RankMap::uniform(3, 1);
        config.wait_timeout = std::chrono::milliseconds(30000);
        const EmulationResult emulated = emulate(kBroken, shape, op, config);
        INFO(emulated.failure);
        CHECK(emulated.verified);
        std::vector<Bytes> exact(3, Bytes(static_cast<std::size_t>(count) * op.element_bytes));
        for (int r = 0; r < 3; ++r) fill_input(op, r, count, exact[static_cast<std::size_t>(r)].data());
        const std::vector<Bytes> exact_results = run_schedule(kBroken.plan(shape), 3, count, op, exact);
        CHECK(disagreement(exact_results, op).empty());
        CHECK(inaccuracy(exact_results, exact, op).empty());
        // (c) On random inexact inputs the agreement check catches rank 2,
        // while the accuracy check (any association is accurate) does not.
        const AgreementOutcome random = run_and_check(kBroken.plan(shape), 3, count, op, 1);
        INFO(random.disagreement);
        CHECK_THAT(random.disagreement, Catch::StartsWith("rank 2 differs from rank 0"));
        CHECK(random.inaccuracy.empty());
      }
}

TEST_CASE("bitwise agreement: the accuracy check rejects a result that misses a rank", "[bitwise]") {
  // The same result on every rank, but rank 2's contribution left out: the
  // agreement check is satisfied, the accuracy check must not be.
  for (DType dtype : {DType::float32, DType::float64})
    for (const char* op_name : {"sum", "prod"}) {
      const ReduceOp op = builtin_op(op_name, dtype);
      const std::uint64_t n = 100;
      const std::vector<Bytes> inputs = random_inputs(op, 3, n, 7);
      Bytes partial = inputs[0];
      op.combine(partial.data(), inputs[1].data(), n, Combine::right);
      const std::vector<Bytes> results(3, partial);
      INFO(to_string(dtype) << " " << op_name);
      CHECK(disagreement(results, op).empty());
      CHECK_THAT(inaccuracy(results, inputs, op), Catch::Contains("is not within"));
      Bytes full = partial;
      op.combine(full.data(), inputs[2].data(), n, Combine::right);
      CHECK(inaccuracy(std::vector<Bytes>(3, full), inputs, op).empty());
    }
}

// The arithmetic of a case, rotating over the cases: whether ranks agree is
// decided by the schedule's shape (p, count, blocks, hierarchy), which the
// loops cross in full; the datatype and operator only decide how a
// difference would show, so each shape gets one of them in turn and each
// algorithm meets all of them.
ReduceOp arithmetic(std::size_t i) {
  static const ReduceOp kinds[] = {builtin_op("sum", DType::float32),  builtin_op("sum", DType::float64),
                                   builtin_op("prod", DType::float64), builtin_op("sum", DType::float32),
                                   builtin_op("sum", DType::float64),  builtin_op("prod", DType::float32)};
  return kinds[i % std::size(kinds)];
}

TEST_CASE("bitwise agreement: every allreduce algorithm gives every rank the same bits", "[bitwise]") {
  std::uint64_t seed = 1000000;
  std::size_t runs = 0;
  for (const AlgorithmInfo* algorithm : allreduce_algorithms())
    for (int p : {1, 2, 3, 5, 7, 8, 12, 13, 16, 17}) {
      std::vector<AgreementCase> cases;
      for (std::uint64_t count : agreement_counts(p))
        for (int blocks : algorithm->pipelined ? std::vector<int>{1, 2, 7} : std::vector<int>{1}) {
          const Shape shape{p, count, blocks, 0};
          const ReduceOp op = arithmetic(runs++);
          std::ostringstream label;
          label << algorithm->name << ": p " << p << ", " << count << " elements, " << blocks << " blocks, "
                << to_string(op.dtype) << " " << op.name;
          cases.push_back(AgreementCase{label.str(), algorithm->plan(shape), count, op, ++seed});
        }
      require_agreement(p, cases);
    }
  CHECK(runs > 500);
}

TEST_CASE("bitwise agreement: every allreduce algorithm in a hierarchy gives every rank the same bits", "[bitwise]") {
  const std::vector<std::vector<int>> layouts = {{8}, {2, 3}, {5, 8, 1}, {3, 3, 3, 3, 1}};
  std::uint64_t seed = 2000000;
  std::size_t runs = 0;
  for (const std::vector<int>& layout : layouts)
    for (const char* grouping : {"auto", "size:2", "size:3"})
      for (bool multi_leader : {false, true}) {
        const auto plan = make_plan(layout, grouping, multi_leader);
        const int p = plan->ranks;
        for (const AlgorithmInfo* algorithm : allreduce_algorithms()) {
          std::vector<AgreementCase> cases;
          for (std::uint64_t count : agreement_counts(p, {1001}))
            for (int blocks : count == 1001 ? std::vector<int>{1, 2, 7} : std::vector<int>{1, 7}) {
              const Shape shape{p, count, blocks, 0};
              const ReduceOp op = arithmetic(runs++);
              std::ostringstream label;
              label << algorithm->name << " over nodes " << layout_text(layout) << ", grouping " << grouping
                    << (multi_leader ? ", multi-leader" : "") << ": " << count << " elements, " << blocks << " blocks, "
                    << to_string(op.dtype) << " " << op.name;
              cases.push_back(
                  AgreementCase{label.str(), plan_hierarchical(plan, *algorithm, shape), count, op, ++seed});
            }
          require_agreement(p, cases, plan->node_of);
        }
      }
  CHECK(runs > 500);
}

TEST_CASE("concurrency: bitwise agreement: every allreduce algorithm through Comm gives every rank the same bits",
          "[bitwise][comm]") {
  const std::vector<int> layout{3, 4, 1};
  std::uint64_t seed = 3000000;
  int index = 0;
  for (const AlgorithmInfo* algorithm : allreduce_algorithms()) {
    TeamOptions options;
    for (int k : layout) options.nodes.push_back(NodeSpec{Machine::synthetic(testing::kCommMachine), k, {}});
    options.grouping = Grouping::parse("size:2");
    options.multi_leader = index++ % 2 == 1;
    options.allreduce = std::string(algorithm->name);
    options.wait_timeout = std::chrono::milliseconds(30000);
    Team team(options);
    const int p = team.size();
    struct Call {
      ReduceOp op;
      std::uint64_t count;
      bool in_place;
      std::uint64_t seed;
      std::vector<Bytes> inputs, results;
    };
    std::vector<Call> calls;
    for (const auto& [op_name, dtype] :
         {std::pair{"sum", DType::float32}, std::pair{"sum", DType::float64}, std::pair{"prod", DType::float64}})
      for (std::uint64_t count : {std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{1000}}) {
        Call call{builtin_op(op_name, dtype), count, calls.size() % 2 == 1, ++seed, {}, {}};
        call.inputs = random_inputs(call.op, p, count, call.seed);
        call.results.assign(static_cast<std::size_t>(p),
                            Bytes(static_cast<std::size_t>(count) * call.op.element_bytes));
        calls.push_back(std::move(call));
      }
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(p));
    std::vector<std::thread> threads;
    for (int r = 0; r < p; ++r)
      threads.emplace_back([&, r] {
        const auto rz = static_cast<std::size_t>(r);
        try {
          Comm& comm = team.comm(r);
          for (Call& call : calls) {
            Bytes& out = call.results[rz];
            if (call.in_place) {
              out = call.inputs[rz];
              comm.allreduce(out.data(), out.data(), call.count, call.op);
            } else {
              comm.allreduce(call.inputs[rz].data(), out.data(), call.count, call.op);
            }
          }
        } catch (...) {
          errors[rz] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < p; ++r) {
      const auto& e = errors[static_cast<std::size_t>(r)];
      INFO(algorithm->name << ": rank " << r << ": " << (e ? message_of(e) : ""));
      REQUIRE_FALSE(e);
    }
    for (const Call& call : calls) {
      INFO(algorithm->name << " through Comm over nodes " << layout_text(layout)
                           << (options.multi_leader ? ", multi-leader" : "") << ": " << call.count << " elements, "
                           << to_string(call.op.dtype) << " " << call.op.name << (call.in_place ? ", in place" : "")
                           << ", seed " << call.seed);
      const std::string differ = disagreement(call.results, call.op),
                        wrong = inaccuracy(call.results, call.inputs, call.op);
      INFO(differ << wrong);
      REQUIRE(differ.empty());
      REQUIRE(wrong.empty());
    }
  }
}
