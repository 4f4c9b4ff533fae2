#include "runtime/comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <string_view>
#include <utility>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "exec/step_executor.hpp"
#include "plan/hierarchical.hpp"
#include "plan/plan_cache.hpp"
#include "plan/planner.hpp"
#include "runtime/failure_record.hpp"
#include "runtime/rank_core.hpp"
#include "runtime/team_wait.hpp"
#include "transport/arena.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/link_engine.hpp"

namespace copse {

// How the pieces fit:
//  - Team owns the hierarchy plan, one HeapArena and one LinkEngine whose
//    link state (an outbox, inbox and progress record per rank) lives in the
//    arena. Every rank's thread runs its steps through that engine, so a
//    receiver reads the sender's (user) buffer directly: one copy per transfer.
//  - Schedules are planned once per shape for the whole team (the
//    hierarchical SchedulePlan and its block count, under a mutex), then
//    materialised once per rank into that rank's Comm cache together with
//    its scratch (staging for overlapping steps, the working copy for reduce
//    and reduce_scatter), carved from the arena. A repeated call finds its
//    entry and only moves data: no allocation.
//  - Arrival-aware allreduces (slt, prr; plan/arrival_monitor.hpp): the
//    ranks' predictions meet on the team's ArrivalBoard; each call waits for
//    all of them, compresses them into an ArrivalKey and plans per key. Those
//    plans are bounded: at most ArrivalOptions::plans keys per shape, in the
//    team's list and in each rank's cache alike (least recently used go
//    first), and a rank's keyed entries share one scratch area. A plan is a
//    pure function of its key, so evicting on one rank and not another never
//    makes two ranks run different schedules. During the warm-up the same
//    calls run the team's default allreduce (entries keyed by that
//    algorithm).
//  - Planning (form, algorithm, block count) is the one planner's
//    (plan/planner.hpp), as for the MPI Comm and the emulator; the per-call
//    path (entry, run, the direct paths, arrival) is the runtime core's
//    (runtime/rank_core.hpp), as for the MPI Comm. This file: the team, its
//    shared plans and board, and where each collective's working vector is.

namespace {

// What a Comm needs of its team (Team::Impl is private to Team); the core's
// part (engine, direct reduce, failure) is CoreTeam's.
struct TeamState : CoreTeam {
  TeamOptions options;
  std::shared_ptr<const HierarchyPlan> plan;
  HeapArena arena;

  Planner planner;
  std::mutex plans_mutex;
  PlanCache<std::shared_ptr<const CompiledPlan>> plans;  // team-wide, keyed by the call alone

  // Arrival estimates: set when the configured allreduce is arrival-aware.
  std::unique_ptr<ArrivalBoard> board;

  FailureRecord failure;  // the first failure; every aborted rank rethrows it

  TeamState() { settings = &options; }
  ~TeamState() override {
    // The engine and the direct reduce live in the arena: they go first.
    direct.reset();
    engine.reset();
  }

  // The team's plan of `key`: planned once, shared by every rank.
  std::shared_ptr<const CompiledPlan> compiled(const CallKey& key) {
    std::lock_guard<std::mutex> lock(plans_mutex);
    if (auto* found = plans.find(key, DType::uint8, nullptr)) return found->value;
    auto made = std::make_shared<const CompiledPlan>(planner.plan(key));
    return plans.insert({key, DType::uint8, nullptr, made}).value;
  }

  CallKey key_of(Collective c, std::uint64_t count, std::size_t element_bytes, const ReduceOp* op, int root,
                 bool warmup = false) const {
    return options.call_key(c, count, element_bytes, op ? op->commutative : true, root, warmup);
  }

  [[noreturn]] void rethrow_failure() override {
    failure.rethrow_if_any();
    throw LinkAborted();
  }
};

// One thread rank: the core, with its cache of the team's plans and the
// working memory each of them needs, carved from the team's arena.
struct ThreadRank final : RankCore {
  // One cached call on this rank.
  struct Entry {
    std::shared_ptr<const CompiledPlan> shared;
    std::vector<Step> steps;
    std::byte* scratch = nullptr;  // staging for steps whose send and receive overlap (keyed: arrival_scratch)
    std::byte* work = nullptr;     // reduce, reduce_scatter: the working copy of send; scatter, gather, alltoall: y
    ReduceOp data_op;              // bcast, allgather, barrier: element size only (replace never combines)
    bool keyed = false;
  };

  TeamState* team;
  PlanCache<Entry> cache;
  std::byte* arrival_scratch = nullptr;  // shared by this rank's keyed entries
  std::size_t arrival_scratch_bytes = 0;

  ThreadRank(TeamState* t, int r)
      : RankCore(*t, r), team(t), cache(std::numeric_limits<std::size_t>::max(), t->options.arrival.plans) {
    link.clock = RankClock(t->options.model.ports());
    if (!t->options.virtual_clock) {
      // A stage for eager sends (link_engine.cpp, try_post): messages up to
      // this size are copied and done at once, instead of a rendezvous whose
      // acknowledgement costs more than the copy (T = 2, 64 and 256 B: median
      // 0.29-0.30 us as rendezvous, 0.23-0.26 us eager; at 1 KiB the two
      // copies cost what the acknowledgement saves).
      constexpr std::size_t kEagerStageBytes = 512;
      t->engine->set_stage(r, t->arena.address(t->arena.allocate(kEagerStageBytes, 64)), kEagerStageBytes);
    }
  }

  std::size_t cached_plans() const override { return cache.size(); }

  // The cached entry of `key`: the team's plan (planned once for everyone),
  // with this rank's steps and scratch.
  Entry& entry(const CallKey& key, DType dtype, const ReduceOp* op) {
    return cached(cache, key, dtype, op, [&] { return make_entry(key, dtype); });
  }

  // First call of a key on this rank: materialise this rank's steps of the
  // team's plan, carve its scratch from the arena.
  Entry make_entry(const CallKey& key, DType dtype) {
    const Collective c = key.collective;
    Entry e;
    e.shared = team->compiled(key);
    e.keyed = key.arrival.has_value();
    const std::uint64_t elements = vector_elements(c, e.shared->shape);
    const std::uint64_t staging = compile_steps(e.shared->plan, rank, team->ranks, elements, e.steps);
    const std::size_t eb = c == Collective::barrier ? 0 : key.element_bytes;
    if (e.keyed) {
      // Keyed entries share arrival_scratch; the others are never evicted
      // (no capacity bound), so no arena space is lost.
      if (staging * eb > arrival_scratch_bytes) {
        arrival_scratch_bytes = staging * eb;
        arrival_scratch = team->arena.address(team->arena.allocate(arrival_scratch_bytes, 64));
      }
    } else if (staging * eb > 0) {
      e.scratch = team->arena.address(team->arena.allocate(staging * eb, 64));
    }
    const bool works = c == Collective::reduce || c == Collective::reduce_scatter || !has_hierarchy(c);
    if (works && elements * eb > 0) e.work = team->arena.address(team->arena.allocate(elements * eb, 64));
    e.data_op = data_op(dtype, eb);
    return e;
  }

  void run(Entry& e, std::byte* y, const ReduceOp& op, RunInput input = {}) {
    const Collective c = e.shared->algorithm->collective;
    RankCore::run(e.steps, y, e.keyed ? arrival_scratch : e.scratch, op, c, nullptr, input);
    returned(c);
  }

  // ---- arrival: the team's board ----
  void publish(std::int64_t call, Picos value) override { team->board->publish(rank, call, value); }
  void collect(std::int64_t call, const std::function<void()>& look) override {
    team->board->wait(call, predicted, look);
  }
  std::vector<int> missing(std::int64_t call) override { return team->board->missing(call); }

  // ---- the collectives ----
  void allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) override;
  void reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) override;
  void bcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void barrier() override;
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) override;
  void reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) override;
  void move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) override;
  std::shared_ptr<PendingCall> make_call(const CallArgs& args, bool persistent) override;  // below
};

void ThreadRank::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  if (allreduce_direct(send, recv, count, op)) return;
  bool warmup = false;
  const ArrivalKey* arrival = arrive(warmup);  // plan/arrival_monitor.hpp
  CallKey key = team->key_of(Collective::allreduce, count, op.element_bytes, &op, 0, warmup);
  if (arrival) key.arrival = *arrival;
  run(entry(key, op.dtype, &op), bytes_of(recv), op, input_of(send, recv, count));
}

void ThreadRank::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  if (reduce_direct(send, recv, count, op, root)) return;
  auto& e = entry(team->key_of(Collective::reduce, count, op.element_bytes, &op, root), op.dtype, &op);
  // The root works in its receive buffer, the others in private memory.
  std::byte* y = rank == root ? bytes_of(recv) : e.work;
  run(e, y, op, input_of(send, y, count, rank == root));
}

void ThreadRank::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  if (bcast_direct(buffer, count, dtype_size(dtype), root)) return;
  auto& e = entry(team->key_of(Collective::bcast, count, dtype_size(dtype), nullptr, root), dtype, nullptr);
  run(e, bytes_of(buffer), e.data_op);
}

void ThreadRank::barrier() {
  if (barrier_direct()) return;
  // One element of zero bytes: the schedule's messages carry no data, only
  // the rendezvous (and alpha on the virtual clock).
  auto& e = entry(team->key_of(Collective::barrier, 1, 0, nullptr, 0), DType::uint8, nullptr);
  alignas(64) static std::byte nothing[64];
  run(e, nothing, e.data_op);
}

void ThreadRank::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  if (allgather_direct(send, recv, count, dtype_size(dtype))) return;
  auto& e = entry(team->key_of(Collective::allgather, count, dtype_size(dtype), nullptr, 0), dtype, nullptr);
  const std::size_t bytes = count * dtype_size(dtype);
  // In place (send == recv): the contribution is already at its block.
  if (send != recv) copy_bytes(bytes_of(recv) + static_cast<std::size_t>(rank) * bytes, send, bytes);
  run(e, bytes_of(recv), e.data_op);
}

void ThreadRank::reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  if (reduce_scatter_block_direct(send, recv, count, op)) return;
  auto& e = entry(team->key_of(Collective::reduce_scatter, count, op.element_bytes, &op, 0), op.dtype, &op);
  const std::size_t bytes = count * op.element_bytes;
  run(e, e.work, op, input_of(send, e.work, count * static_cast<std::size_t>(team->ranks)));
  copy_bytes(recv, e.work + static_cast<std::size_t>(rank) * bytes, bytes);
}

void ThreadRank::reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  const BlockCounts b = BlockCounts::of(counts, team->ranks);
  if (b.equal) return reduce_scatter_block(send, recv, b.block, op);
  if (reduce_scatter_direct(send, recv, b, op)) return;
  auto& e = entry(team->key_of(Collective::reduce_scatter, b.block, op.element_bytes, &op, 0), op.dtype, &op);
  const std::size_t eb = op.element_bytes;
  // The blocks padded to the largest, in the work vector (in place: read
  // from recv before the result overwrites it).
  b.pack(bytes_of(send), e.work, 0, b.block, eb, [&](int v) { return static_cast<std::size_t>(v) * b.block * eb; });
  run(e, e.work, op);
  copy_bytes(recv, e.work + static_cast<std::size_t>(rank) * b.block * eb,
             b.counts[static_cast<std::size_t>(rank)] * eb);
}

// The working vector is the entry's (the user's buffers hold blocks in
// another layout, and a scatter's non-roots have none of the others').
void ThreadRank::move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) {
  const std::size_t eb = dtype_size(dtype);
  if (c == Collective::alltoall) root = 0;
  auto& e = entry(team->key_of(c, count, eb, nullptr, root), dtype, nullptr);
  const MovedBlocks blocks{c, team->ranks, rank, root, count, eb};
  blocks.load(send, recv, e.work, 0, count);
  run(e, e.work, e.data_op);
  blocks.store(e.work, send, recv, 0, count);
}

// ---- nonblocking and persistent allreduce (runtime/pending.hpp) ----

// A thread rank's allreduce as a call: the team's plan (planning waits for
// no other rank), then the run, progressed a step at a time -- the same run
// as the blocking allreduce's schedule (never the direct reduce's slots).
class ThreadAllreduce final : public PendingCall {
 public:
  ThreadAllreduce(ThreadRank& rank, const CallArgs& args) : r_(rank), a_(args) {}
  bool progress(bool wait) override {
    if (!entry_) {
      const ReduceOp& op = *a_.op;
      entry_ = &r_.entry(r_.team->key_of(Collective::allreduce, a_.count, op.element_bytes, &op, 0), op.dtype, &op);
      r_.start_run(run_, entry_->steps, bytes_of(a_.recv), entry_->scratch, op, Collective::allreduce, nullptr,
                   input_of(a_.send, a_.recv, a_.count));
    }
    if (!r_.advance_run(run_, nullptr, wait)) return false;
    entry_ = nullptr;
    r_.returned(Collective::allreduce);
    return true;
  }
  void restart() override { entry_ = nullptr; }

 private:
  ThreadRank& r_;
  const CallArgs a_;
  ThreadRank::Entry* entry_ = nullptr;  // while running
  StepRun run_;
};

std::shared_ptr<PendingCall> ThreadRank::make_call(const CallArgs& args, bool persistent) {
  if (args.collective != Collective::allreduce)
    throw UsageError("the thread Comm's nonblocking collectives: iallreduce and allreduce_init only");
  auto call = std::make_shared<ThreadAllreduce>(*this, args);
  if (persistent) {
    drain();
    entry(team->key_of(Collective::allreduce, args.count, args.op->element_bytes, args.op, 0), args.op->dtype,
          args.op);  // planned now
    reserve_for_persistent();
    link.unwritten.reserve(16);
  }
  return call;
}

}  // namespace

// ---- Team -------------------------------------------------------------------------

struct Team::Impl : TeamState {
  std::vector<Comm> comms;
};

Team::Team(TeamOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& t = *impl_;
  // Unknown algorithm names, arrival options and waits are refused now, not at the first call.
  options.check();
  if (options.nodes.empty()) {
    if (options.ranks < 1) throw UsageError("a team needs at least one rank, got " + std::to_string(options.ranks));
    options.nodes.push_back(NodeSpec{Machine::detect(), options.ranks, {}});
  }
  t.options = std::move(options);
  // The configured form's hierarchy now (Team::plan); the others when a
  // form auto first asks for them.
  const bool multi = t.options.form_in_effect() == Form::multi_leader;
  t.plan = std::make_shared<const HierarchyPlan>(plan_hierarchy(t.options.nodes, t.options.grouping, multi));
  t.ranks = t.plan->ranks;
  t.shares_memory = true;
  if (t.plan->first_rank.size() > 1 && t.options.model.levels() < 2)
    throw UsageError("the cost model needs a link level for other nodes (level 1)");
  PlanContext context;
  context.layout = RankMap::from_nodes(t.plan->node_of);
  context.model = t.options.model;
  (multi ? context.multi_leader : context.leader) = t.plan;
  context.node_specs = [nodes = t.options.nodes] { return nodes; };
  context.grouping = t.options.grouping;
  t.planner = Planner(std::move(context));
  t.plans =
      PlanCache<std::shared_ptr<const CompiledPlan>>(std::numeric_limits<std::size_t>::max(), t.options.arrival.plans);
  if (t.options.allreduce != kSelectAlgorithm &&
      find_algorithm(Collective::allreduce, t.options.allreduce).arrival_aware)
    t.board = std::make_unique<ArrivalBoard>(t.ranks);
  t.arrival_aware = static_cast<bool>(t.board);

  TeamState* state = &t;
  t.engine = std::make_unique<LinkEngine>(
      t.arena, LinkEngine::create_shared(t.arena, t.ranks),
      executor_config(RankMap::from_nodes(t.plan->node_of),
                      t.options.virtual_clock ? std::optional(t.options.model) : std::nullopt,
                      team_waits(t.options.wait_timeout, t.options.wait_report, t.options.on_wait_report),
                      [state](std::exception_ptr e) { state->failure.record(std::move(e)); }));
  if (!t.options.virtual_clock && t.plan->first_rank.size() == 1 && DirectReduce::serves(t.ranks))
    t.direct = std::make_unique<DirectReduce>(t.arena, DirectReduce::create_shared(t.arena, t.ranks), t.ranks,
                                              t.engine->spin_policy());

  t.comms.reserve(static_cast<std::size_t>(t.ranks));
  for (int r = 0; r < t.ranks; ++r) t.comms.emplace_back(std::make_unique<ThreadRank>(&t, r));
}

Team::~Team() = default;

int Team::size() const { return impl_->ranks; }
const RankMap& Team::layout() const { return impl_->planner.layout(); }
const HierarchyPlan& Team::plan() const { return *impl_->plan; }
const Planner& Team::planner() const { return impl_->planner; }
std::shared_ptr<const CompiledPlan> Team::compiled_plan(const CallKey& key) { return impl_->compiled(key); }

Comm& Team::comm(int rank) {
  if (rank < 0 || rank >= impl_->ranks)
    throw UsageError("rank " + std::to_string(rank) + " is not in this team of " + std::to_string(impl_->ranks));
  return impl_->comms[static_cast<std::size_t>(rank)];
}

}  // namespace copse
