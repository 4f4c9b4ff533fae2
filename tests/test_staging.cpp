// The executor's one staging layer (exec/step_executor.hpp): a receive lands
// in the rank's scratch and is applied afterwards when its step's send still
// reads the region, or when it combines over a link that cannot combine in
// place (Link::combines_in_place; the MPI link). Driven here over a network
// link of the test's own that refuses to combine and, like a rendezvous,
// reads the sender's buffer only when the receiver takes the message -- so a
// receive that overwrote a region its own send had not yet delivered, or a
// combining receive handed to the link, fails the run -- against the
// sequential reference, with the non-commutative operator; and over the
// shared-memory link and that network link together, as an MPI rank runs.
// The scratch is exactly what compile_steps asks for, with a guard behind it.

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "exec/step_executor.hpp"
#include "tests/support.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"

using namespace copse;

namespace staging_test {

// A network link among threads: a send posts its region, and the receiver
// copies it out of the sender's buffer when it takes it (the send is done
// then). It never combines: a combining receive is a ScheduleError. One
// link serves every rank (its per-rank state is its outboxes); a failed rank
// ends the others' waits (LinkAborted) through `aborted`.
class RendezvousLink final : public Link {
 public:
  explicit RendezvousLink(int ranks) : outbox_(static_cast<std::size_t>(ranks)) {}

  void start_send(LinkRank& c, const Transfer& send, const std::byte* data) override {
    c.begin_send(send);
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_[static_cast<std::size_t>(c.rank)] = Outbox{true, send.peer, data, send.count};
  }
  bool test_send(LinkRank& c) override {
    if (c.send_done) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    check_aborted();
    if (outbox_[static_cast<std::size_t>(c.rank)].posted) return false;  // not taken yet
    c.send_done = true;
    return true;
  }
  void start_recv(LinkRank& c, const Transfer& recv, std::byte* target, Combine side) override {
    if (side != Combine::replace && recv.count > 0 && c.eb > 0)
      throw ScheduleError("rank " + std::to_string(c.rank) + " step " + std::to_string(c.step) +
                          ": a link that cannot combine in place was asked to combine");
    c.begin_recv(recv, target, side);
  }
  bool test_recv(LinkRank& c) override {
    if (c.recv_done) return true;
    std::lock_guard<std::mutex> lock(mutex_);
    check_aborted();
    Outbox& from = outbox_[static_cast<std::size_t>(c.receiving.peer)];
    if (!from.posted || from.to != c.rank) return false;
    if (from.count != c.receiving.count) throw ScheduleError("size mismatch");
    if (from.count * c.eb > 0) std::memcpy(c.recv_target, from.data, static_cast<std::size_t>(from.count * c.eb));
    from.posted = false;
    c.recv_done = true;
    return true;
  }
  bool can_block() const override { return false; }
  bool combines_in_place() const override { return false; }
  void block(LinkRank&, LinkRank::Wait, const WaitPolicy&) override {}
  void withdraw(LinkRank& c) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    outbox_[static_cast<std::size_t>(c.rank)].posted = false;
    c.send_done = c.recv_done = true;
  }
  std::string peer_state(const LinkRank&, int) const override { return ""; }

  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }

 private:
  struct Outbox {
    bool posted = false;
    int to = -1;
    const std::byte* data = nullptr;
    std::uint64_t count = 0;
  };
  void check_aborted() const {
    if (aborted_) throw LinkAborted();
  }
  std::mutex mutex_;
  std::vector<Outbox> outbox_;
  bool aborted_ = false;
};

constexpr std::size_t kGuardBytes = 64;
constexpr auto kGuard = std::byte{0x5A};

// Ranks on nodes of `sizes`, each rank a process of its own: ranks of one
// node share memory, the others do not (as MPI processes).
RankMap processes_on_nodes(const std::vector<int>& sizes) {
  std::vector<RankMap::Place> places;
  for (std::size_t node = 0; node < sizes.size(); ++node)
    for (int i = 0; i < sizes[node]; ++i) {
      const int rank = static_cast<int>(places.size());
      places.push_back(RankMap::Place{static_cast<int>(node), rank, 0, rank});
    }
  return RankMap::from_places(std::move(places));
}

// Every rank's result and error of one allreduce.
struct Outcome {
  std::vector<std::vector<std::byte>> y;
  std::vector<std::string> error;
  std::vector<bool> guard_intact;
};

// `algorithm`'s allreduce of n elements on `layout`'s ranks, one thread
// each: ranks that share memory over a shared-memory link engine, the
// others over a RendezvousLink; each rank's scratch exactly what
// compile_steps sizes for the executor's links, with a guard behind it.
Outcome run_allreduce(const RankMap& layout, const AlgorithmInfo& algorithm, const ReduceOp& op, std::uint64_t n,
                      std::optional<CostModel> clock = std::nullopt) {
  const int p = layout.ranks();
  const auto pz = static_cast<std::size_t>(p);
  RendezvousLink network(p);
  const ExecutorConfig config =
      executor_config(layout, clock, wait_settings(std::chrono::milliseconds(20000), "repetition"),
                      [&network](std::exception_ptr) { network.abort(); });
  HeapArena arena;
  const bool any_shared = layout.nodes() < p;
  std::optional<LinkEngine> engine;
  if (any_shared) engine.emplace(arena, LinkEngine::create_shared(arena, p), config);
  const SchedulePlan plan = algorithm.plan(Shape{p, n, 2, 0});
  Outcome out{std::vector<std::vector<std::byte>>(pz), std::vector<std::string>(pz), std::vector<bool>(pz, true)};
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      const auto rz = static_cast<std::size_t>(r);
      try {
        StepExecutor executor(config, engine ? &*engine : nullptr, &network);
        std::vector<Step> steps;
        const std::uint64_t staged =
            compile_steps(plan, r, p, n, steps, [&](int peer) { return executor.combines_in_place(r, peer); });
        std::vector<std::byte> scratch(static_cast<std::size_t>(staged * op.element_bytes) + kGuardBytes, kGuard);
        std::vector<std::byte>& y = out.y[rz];
        y.resize(static_cast<std::size_t>(n * op.element_bytes));
        fill_input(op, r, n, y.data());
        LinkRank c;
        c.rank = r;
        c.clock = RankClock(clock ? clock->ports() : Ports::bidirectional);
        executor.run(c, steps, y.data(), scratch.data(), op);
        for (std::size_t b = scratch.size() - kGuardBytes; b < scratch.size(); ++b)
          if (scratch[b] != kGuard) out.guard_intact[rz] = false;
      } catch (...) {
        out.error[rz] = testing::message_of(std::current_exception());
      }
    });
  for (auto& t : threads) t.join();
  return out;
}

// Every rank's allreduce equals the sequential reference, bit for bit.
void check_outcome(const Outcome& out, const ReduceOp& op, int p, std::uint64_t n) {
  const std::vector<std::byte> want = reference_result(op, p, n);
  for (std::size_t r = 0; r < out.y.size(); ++r) {
    INFO("rank " << r);
    CHECK(out.error[r] == "");
    CHECK(out.guard_intact[r]);
    CHECK(out.y[r].size() == want.size());
    CHECK((want.empty() || std::memcmp(out.y[r].data(), want.data(), want.size()) == 0));
  }
}

// The allreduces of the registry (those `names`, or all) that take `op`.
std::vector<const AlgorithmInfo*> allreduces_for(const ReduceOp& op, const std::vector<std::string>& names = {}) {
  std::vector<const AlgorithmInfo*> out;
  for (const AlgorithmInfo& a : algorithms())
    if (a.collective == Collective::allreduce && !a.arrival_aware && (op.commutative || !a.needs_commutative) &&
        (names.empty() || std::find(names.begin(), names.end(), a.name) != names.end()))
      out.push_back(&a);
  return out;
}

// Float sums (exact on fill_input's values) and the non-commutative affine operator.
std::vector<ReduceOp> operators() { return {builtin_op("sum", DType::float32), builtin_op("affine", DType::uint32)}; }

// Each rank a node of its own: every transfer over the network link.
RankMap apart(int p) { return processes_on_nodes(std::vector<int>(static_cast<std::size_t>(p), 1)); }

}  // namespace staging_test

using namespace staging_test;

TEST_CASE("staging: compile_steps sizes the scratch for the receives the links cannot combine", "[staging]") {
  // Ring: a reduce-scatter of p - 1 combining receives of one block each, no
  // send and receive of one step overlapping. Recursive doubling: whole-vector
  // exchanges, each step's receive overlapping its send.
  const int p = 4;
  const std::uint64_t n = 1000;
  auto scratch_of = [&](const char* name, const CombinesInPlace& in_place) {
    std::vector<Step> steps;
    return compile_steps(find_algorithm(Collective::allreduce, name).plan(Shape{p, n, 1, 0}), 1, p, n, steps, in_place);
  };
  const auto refuses = [](int) { return false; };
  CHECK(scratch_of("ring", {}) == 0);
  CHECK(scratch_of("ring", [](int) { return true; }) == 0);
  CHECK(scratch_of("ring", refuses) == n / p);
  CHECK(scratch_of("recursive-doubling", {}) == n);
  CHECK(scratch_of("recursive-doubling", refuses) == n);
  // Only the receives from peers over such a link count.
  CHECK(scratch_of("ring", [](int peer) { return peer != 0; }) == n / p);
  CHECK(scratch_of("ring", [](int peer) { return peer == 0; }) == 0);  // rank 1 receives from rank 0 only
}

TEST_CASE("staging: over a link that cannot combine in place, every allreduce is the sequential reference",
          "[staging]") {
  for (const ReduceOp& op : operators())
    for (const AlgorithmInfo* algorithm : allreduces_for(op))
      for (int p : {2, 3, 4, 5})
        for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{1000}}) {
          INFO(algorithm->name << " " << op.name << " p=" << p << " n=" << n);
          check_outcome(run_allreduce(apart(p), *algorithm, op, n), op, p, n);
        }
}

TEST_CASE("staging: one-port ranks (a send or a receive goes first) stage what the link cannot combine", "[staging]") {
  const CostModel one_port({model_defaults::same_node, model_defaults::other_node}, model_defaults::gamma,
                           Ports::unidirectional);
  for (const ReduceOp& op : operators())
    for (const AlgorithmInfo* algorithm :
         allreduces_for(op, {"recursive-doubling", "ring", "rabenseifner", "dual-root"}))
      for (int p : {2, 3, 5}) {
        INFO(algorithm->name << " " << op.name << " p=" << p);
        check_outcome(run_allreduce(apart(p), *algorithm, op, 100, one_port), op, p, 100);
      }
}

TEST_CASE("staging: node peers over shared memory, the others over a link that cannot combine", "[staging]") {
  // As an MPI rank runs: the shared-memory link combines in place (no scratch
  // for it), the network's combining receives are staged.
  for (const ReduceOp& op : operators())
    for (const std::vector<int>& nodes : {std::vector<int>{2, 2}, std::vector<int>{3, 2}, std::vector<int>{1, 2, 1}})
      for (const AlgorithmInfo* algorithm :
           allreduces_for(op, {"recursive-doubling", "ring", "rabenseifner", "binomial", "chain"}))
        for (std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1000}}) {
          const RankMap layout = processes_on_nodes(nodes);
          INFO(algorithm->name << " " << op.name << " on " << layout.nodes() << " nodes, n=" << n);
          check_outcome(run_allreduce(layout, *algorithm, op, n), op, layout.ranks(), n);
        }
}
