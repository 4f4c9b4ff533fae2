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
#include "runtime/call_buffers.hpp"
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
    return cached(cache, key, dtype, op, [&] { return make_entry(key); });
  }

  // First call of a key on this rank: materialise this rank's steps of the
  // team's plan, carve its scratch from the arena.
  Entry make_entry(const CallKey& key) {
    const Collective c = key.collective;
    Entry e;
    e.shared = plan_in_call_form(key, [&](const CallKey& k) { return team->compiled(k); });
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
    const bool works = c == Collective::reduce || c == Collective::reduce_scatter || MovedBlocks::moves(c);
    if (works && elements * eb > 0) e.work = team->arena.address(team->arena.allocate(elements * eb, 64));
    return e;
  }

  // Runs the call of `args` to its end (ThreadCall, below), over `e` if
  // given (else the arguments' entry).
  void run(const CallArgs& args, Entry* e = nullptr);

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

// A thread rank's collective: its cached entry (the team's plan, this rank's
// steps and scratch), its working vector loaded as the call's buffers say
// (runtime/call_buffers.hpp), its run started, then progressed -- waiting, for
// a blocking call; a step at a time, for a nonblocking or persistent one
// (runtime/pending.hpp) -- and its result stored. One call for both, so a
// nonblocking call computes what the blocking one does, bit for bit.
class ThreadCall final : public PendingCall {
 public:
  // `entry`: the call's (an allreduce planned by arrival); null: found or
  // made now, from the arguments (UsageError for a bad root or operator).
  ThreadCall(ThreadRank& rank, const CallArgs& args, ThreadRank::Entry* entry = nullptr)
      : r_(rank), b_(args, rank.team->ranks, rank.rank), e_(entry ? *entry : entry_of(rank, b_)) {}
  bool progress(bool wait) override {
    if (!running_) {
      // The entry's work memory holds every piece this rank works on
      // (ThreadRank::make_entry); a call that needs none gets a few bytes
      // nobody reads (a barrier's messages carry no data).
      alignas(64) static std::byte nothing[64];
      piece_ = b_.load(0, b_.count(), e_.work ? e_.work : nothing);
      r_.start_run(run_, e_.steps, piece_.y, e_.keyed ? r_.arrival_scratch : e_.scratch, b_.op(), b_.collective(),
                   nullptr, piece_.input);
      running_ = true;
    }
    if (!r_.advance_run(run_, nullptr, wait)) return false;
    running_ = false;
    b_.store(piece_);
    r_.returned(b_.collective());
    return true;
  }
  void restart() override { running_ = false; }

 private:
  static ThreadRank::Entry& entry_of(ThreadRank& r, const CallBuffers& b) {
    const CallArgs& a = b.args();
    return r.entry(r.call_key(r.team->options, r.call_choice, a.collective, b.count(), b.element_bytes(), a.op, a.root),
                   a.dtype, a.op);
  }

  ThreadRank& r_;
  const CallBuffers b_;
  ThreadRank::Entry& e_;  // the cache's: never evicted (only arrival-keyed entries are)
  CallPiece piece_;
  StepRun run_;
  bool running_ = false;
};

void ThreadRank::run(const CallArgs& args, Entry* e) {
  ThreadCall call(*this, args, e);
  call.progress(true);
}

void ThreadRank::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  if (allreduce_direct(send, recv, count, op)) return;
  bool warmup = false;
  const ArrivalKey* arrival = arrive(warmup);  // plan/arrival_monitor.hpp
  CallKey key = call_key(team->options, call_choice, Collective::allreduce, count, op.element_bytes, &op, 0, warmup);
  if (arrival) key.arrival = *arrival;
  run({Collective::allreduce, send, recv, count, &op, op.dtype, 0}, &entry(key, op.dtype, &op));
}

void ThreadRank::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  if (reduce_direct(send, recv, count, op, root)) return;
  run({Collective::reduce, send, recv, count, &op, op.dtype, root});
}

void ThreadRank::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  if (bcast_direct(buffer, count, dtype_size(dtype), root)) return;
  run({Collective::bcast, buffer, buffer, count, nullptr, dtype, root});
}

void ThreadRank::barrier() {
  if (barrier_direct()) return;
  run({Collective::barrier, nullptr, nullptr, 0, nullptr});
}

void ThreadRank::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  if (allgather_direct(send, recv, count, dtype_size(dtype))) return;
  run({Collective::allgather, send, recv, count, nullptr, dtype, 0});
}

void ThreadRank::reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  if (reduce_scatter_block_direct(send, recv, count, op)) return;
  run({Collective::reduce_scatter, send, recv, count, &op, op.dtype, 0});
}

void ThreadRank::reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  const BlockCounts b = BlockCounts::of(counts, team->ranks);
  if (b.equal) return reduce_scatter_block(send, recv, b.block, op);
  if (reduce_scatter_direct(send, recv, b, op)) return;
  CallArgs args{Collective::reduce_scatter, send, recv, 0, &op, op.dtype, 0};
  // Not owned (an empty owner, no count to keep): b outlives the call.
  args.blocks = std::shared_ptr<const BlockCounts>(std::shared_ptr<const BlockCounts>(), &b);
  run(args);
}

void ThreadRank::move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) {
  run({c, send, recv, count, nullptr, dtype, root});
}

// ---- nonblocking and persistent calls (runtime/pending.hpp) ----

// Planned now (the team's plan: waiting for no other rank), run from the
// queue. Never the blocking calls' direct paths: where the slots take the
// call, RankCore::direct_call's two halves run it instead.
std::shared_ptr<PendingCall> ThreadRank::make_call(const CallArgs& args, bool persistent) {
  if (persistent) drain();  // in order with this rank's collectives, as the MPI Comm's must
  auto call = std::make_shared<ThreadCall>(*this, args);
  if (persistent) {
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
