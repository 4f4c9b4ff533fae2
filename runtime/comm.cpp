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
#include "runtime/team_direct.hpp"
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
//    (plan/planner.hpp), as for the MPI Comm and the emulator.

namespace {

using Clock = std::chrono::steady_clock;

// What a Comm needs of its team (Team::Impl is private to Team).
struct TeamState {
  TeamOptions options;
  std::shared_ptr<const HierarchyPlan> plan;
  int ranks = 0;
  HeapArena arena;
  std::unique_ptr<LinkEngine> engine;
  // One node without a virtual clock: small allreduces and barriers in one
  // round through shared slots (transport/direct_reduce.hpp), where the
  // selection would choose; null otherwise.
  std::unique_ptr<DirectReduce> direct;

  Planner planner;
  std::mutex plans_mutex;
  PlanCache<std::shared_ptr<const CompiledPlan>> plans;  // team-wide, keyed by the call alone

  // Arrival estimates: set when the configured allreduce is arrival-aware.
  std::unique_ptr<ArrivalBoard> board;
  Clock::time_point origin = Clock::now();

  FailureRecord failure;  // the first failure; every aborted rank rethrows it

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

  [[noreturn]] void rethrow_failure() {
    failure.rethrow_if_any();
    throw LinkAborted();
  }
};

}  // namespace

// ---- Comm -------------------------------------------------------------------------

struct Comm::Impl {
  // One cached call on this rank.
  struct Entry {
    std::shared_ptr<const CompiledPlan> shared;
    std::vector<Step> steps;
    std::byte* scratch = nullptr;  // staging for steps whose send and receive overlap (keyed: arrival_scratch)
    std::byte* work = nullptr;     // reduce, reduce_scatter: the working copy of send
    ReduceOp data_op;              // bcast, allgather, barrier: element size only (replace never combines)
    bool keyed = false;
  };
  using Cache = PlanCache<Entry>;

  TeamState* team;
  int rank;
  LinkRank link;
  std::optional<TeamDirectReduce> direct;  // when the team has a direct reduce
  std::int64_t calls = 0;
  Picos last_time = 0;
  Cache cache;

  ArrivalMonitor monitor;
  std::vector<Picos> predicted;          // the board's vector for the current call
  ArrivalKey agreed_key;                 // ... compressed
  std::vector<Picos> planned;            // what the last allreduce was planned from (empty: not by arrival)
  std::byte* arrival_scratch = nullptr;  // shared by this rank's keyed entries
  std::size_t arrival_scratch_bytes = 0;

  Impl(TeamState* t, int r)
      : team(t),
        rank(r),
        cache(std::numeric_limits<std::size_t>::max(), t->options.arrival.plans),
        monitor(t->options.arrival, static_cast<bool>(t->board)) {
    link.rank = r;
    if (t->direct)
      direct.emplace(*t->engine, *t->direct, link, t->options.wait_timeout, t->options.wait_report,
                     wait_reporter(t->options.on_wait_report));
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
    monitor.returned(now(), false);  // the first phase begins
  }

  Picos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - team->origin).count() * 1000;
  }

  // The cached entry of `key` (`op` is the reduction operator, or null for
  // the collectives that only move data: bcast, allgather, barrier).
  Entry& entry(const CallKey& key, DType dtype, const ReduceOp* op) {
    if (auto* found = cache.find(key, dtype, op ? op->identity.get() : nullptr)) return found->value;
    return plan_entry(key, dtype, op);
  }

  // First call of a key on this rank: plan (team-wide, once), materialise
  // this rank's steps, carve its scratch from the arena.
  Entry& plan_entry(const CallKey& key, DType dtype, const ReduceOp* op) {
    if (team->engine->aborted()) team->rethrow_failure();
    const Collective c = key.collective;
    const int p = team->ranks;
    if ((c == Collective::reduce || c == Collective::bcast) && (key.root < 0 || key.root >= p))
      throw UsageError(std::string(to_string(c)) + ": root " + std::to_string(key.root) + " is not a rank in [0, " +
                       std::to_string(p) + ")");
    const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
    if (reduces && op && key.algorithm != kSelectAlgorithm)  // the operator's own name in the message
      check_operator(find_algorithm(c, key.algorithm), op->name, op->commutative);
    Entry e;
    e.shared = team->compiled(key);
    e.keyed = key.arrival.has_value();
    const std::uint64_t elements = vector_elements(c, e.shared->shape);
    const std::uint64_t staging = compile_steps(e.shared->plan, rank, p, elements, e.steps);
    const std::size_t eb = c == Collective::barrier ? 0 : key.element_bytes;
    if (e.keyed) {
      if (staging * eb > arrival_scratch_bytes) {
        arrival_scratch_bytes = staging * eb;
        arrival_scratch = team->arena.address(team->arena.allocate(arrival_scratch_bytes, 64));
      }
    } else if (staging * eb > 0) {
      e.scratch = team->arena.address(team->arena.allocate(staging * eb, 64));
    }
    if ((c == Collective::reduce || c == Collective::reduce_scatter) && elements * eb > 0)
      e.work = team->arena.address(team->arena.allocate(elements * eb, 64));
    e.data_op.name = "copy";
    e.data_op.dtype = dtype;
    e.data_op.element_bytes = eb;
    // Keyed entries share arrival_scratch; the others are never evicted (no
    // capacity bound), so no arena space is lost.
    return cache.insert({key, dtype, op ? op->identity : nullptr, std::move(e)}).value;
  }

  // Every rank's predicted arrival for allreduce `call`, once all are on the
  // team's board. Waits as the links do: reported every wait_report, failed
  // past wait_timeout, both naming the ranks whose value is missing.
  void agree(std::int64_t call) {
    const TeamOptions& o = team->options;
    PolledWait wait(team_wait_policy(o.wait_timeout, o.wait_report, wait_reporter(o.on_wait_report),
                                     [&] { return arrival_wait_text(calls, rank, team->board->missing(call)); }));
    try {
      team->board->wait(call, predicted, [&] {
        if (team->engine->aborted()) team->rethrow_failure();
        wait.look();
      });
    } catch (...) {
      // Timed out here (every rank then reports it), or aborted by another rank.
      if (!team->engine->aborted()) team->engine->fail(std::current_exception());
      team->rethrow_failure();
    }
  }

  void run(Entry& e, std::byte* y, const ReduceOp& op, RunInput input = {}) {
    LinkEngine& engine = *team->engine;
    if (engine.aborted()) team->rethrow_failure();
    link.round = calls++;
    const Collective collective = e.shared->algorithm->collective;
    link.activity = to_string(collective);
    link.clock.reset();
    try {
      StepExecutor(engine).run(link, e.steps, y, e.keyed ? arrival_scratch : e.scratch, op, nullptr, input);
    } catch (...) {
      // Aborted by another rank, or failed here (recorded before the abort):
      // either way every rank reports the team's first failure.
      team->rethrow_failure();
    }
    last_time = link.clock.now();
    monitor.returned(now(), collective == Collective::allreduce);  // the next computation phase begins
  }

  // Whether collective `c` of `bytes` runs through the team's direct reduce
  // (small vectors through its slots, large ones in slices: `sliced`): it
  // must exist and take the size, and the configuration must leave the
  // choice to the selection (an algorithm named in the options runs as a
  // schedule).
  bool direct_fits(Collective c, std::size_t bytes, bool sliced = false) const {
    return team->direct &&
           (sliced ? DirectReduce::slices(team->ranks, bytes) : DirectReduce::fits(team->ranks, bytes)) &&
           team->options.leaves_choice(c);
  }

  // An allreduce (or, without an operator, a barrier) through the direct
  // reduce; failures as run()'s.
  void run_direct(Collective c, const void* send, void* recv, std::size_t count, const ReduceOp* op,
                  bool sliced = false) {
    if (team->engine->aborted()) team->rethrow_failure();
    link.round = calls++;
    try {
      direct->run(c, send, recv, count, op, sliced);
    } catch (...) {
      team->rethrow_failure();
    }
    last_time = 0;
    monitor.returned(now(), c == Collective::allreduce);
  }
};

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;
Comm::Comm(Comm&&) noexcept = default;

int Comm::rank() const { return impl_->rank; }
int Comm::size() const { return impl_->team->ranks; }
Picos Comm::virtual_time() const { return impl_->last_time; }

namespace {
std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
// An out-of-place collective's input, for the executor to read where the
// working buffer has not been written yet (RunInput) instead of a copy of
// all of it up front. None in place.
RunInput input_of(const void* send, const void* y, std::size_t count) {
  if (send == y) return {};
  return {static_cast<const std::byte*>(send), count};
}
void copy(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}
}  // namespace

void Comm::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  Impl& me = *impl_;
  TeamState& team = *me.team;
  Impl::Entry* e = nullptr;
  if (team.board) {  // arrival-aware (plan/arrival_monitor.hpp)
    const std::int64_t call = me.monitor.call();
    if (auto value = me.monitor.arrive(me.now())) team.board->publish(me.rank, call, *value);
    if (me.monitor.planned_by_arrival(call)) {
      me.agree(call);
      CallKey key = team.key_of(Collective::allreduce, count, op.element_bytes, &op, 0);
      key.arrival.emplace();
      arrival_key(me.predicted, team.options.arrival.resolution, *key.arrival);
      e = &me.entry(key, op.dtype, &op);
      me.planned = e->shared->shape.hints->arrival;
    } else {
      e = &me.entry(team.key_of(Collective::allreduce, count, op.element_bytes, &op, 0, true), op.dtype, &op);
      me.planned.clear();
    }
  } else if (me.direct_fits(Collective::allreduce, count * op.element_bytes)) {
    me.run_direct(Collective::allreduce, send, recv, count, &op);
    return;
  } else if (me.direct_fits(Collective::allreduce, count * op.element_bytes, true)) {
    me.run_direct(Collective::allreduce, send, recv, count, &op, true);
    return;
  } else {
    e = &me.entry(team.key_of(Collective::allreduce, count, op.element_bytes, &op, 0), op.dtype, &op);
  }
  me.run(*e, bytes_of(recv), op, input_of(send, recv, count));
}

void Comm::edge(double fraction) {
  Impl& me = *impl_;
  const std::int64_t call = me.monitor.call();
  if (auto value = me.monitor.edge(me.now(), fraction)) me.team->board->publish(me.rank, call, *value);
}

const std::vector<Picos>& Comm::planned_arrival() const { return impl_->planned; }

void Comm::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  auto& e = impl_->entry(impl_->team->key_of(Collective::reduce, count, op.element_bytes, &op, root), op.dtype, &op);
  const std::size_t bytes = count * op.element_bytes;
  impl_->run(e, e.work, op, input_of(send, e.work, count));
  if (rank() == root) copy(recv, e.work, bytes);
}

void Comm::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  auto& e =
      impl_->entry(impl_->team->key_of(Collective::bcast, count, dtype_size(dtype), nullptr, root), dtype, nullptr);
  impl_->run(e, bytes_of(buffer), e.data_op);
}

void Comm::barrier() {
  if (impl_->direct_fits(Collective::barrier, 0))
    return impl_->run_direct(Collective::barrier, nullptr, nullptr, 0, nullptr);
  // One element of zero bytes: the schedule's messages carry no data, only
  // the rendezvous (and alpha on the virtual clock).
  auto& e = impl_->entry(impl_->team->key_of(Collective::barrier, 1, 0, nullptr, 0), DType::uint8, nullptr);
  alignas(64) static std::byte nothing[64];
  impl_->run(e, nothing, e.data_op);
}

void Comm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  auto& e =
      impl_->entry(impl_->team->key_of(Collective::allgather, count, dtype_size(dtype), nullptr, 0), dtype, nullptr);
  const std::size_t bytes = count * dtype_size(dtype);
  // In place (send == recv): the contribution is already at its block.
  if (send != recv) copy(bytes_of(recv) + static_cast<std::size_t>(rank()) * bytes, send, bytes);
  impl_->run(e, bytes_of(recv), e.data_op);
}

void Comm::reduce_scatter(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  auto& e =
      impl_->entry(impl_->team->key_of(Collective::reduce_scatter, count, op.element_bytes, &op, 0), op.dtype, &op);
  const std::size_t bytes = count * op.element_bytes;
  impl_->run(e, e.work, op, input_of(send, e.work, count * static_cast<std::size_t>(size())));
  copy(recv, e.work + static_cast<std::size_t>(rank()) * bytes, bytes);
}

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
  for (int r = 0; r < t.ranks; ++r) t.comms.push_back(Comm(std::make_unique<Comm::Impl>(&t, r)));
}

Team::~Team() = default;

int Team::size() const { return impl_->ranks; }
const HierarchyPlan& Team::plan() const { return *impl_->plan; }
const Planner& Team::planner() const { return impl_->planner; }
std::shared_ptr<const CompiledPlan> Team::compiled_plan(const CallKey& key) { return impl_->compiled(key); }

Comm& Team::comm(int rank) {
  if (rank < 0 || rank >= impl_->ranks)
    throw UsageError("rank " + std::to_string(rank) + " is not in this team of " + std::to_string(impl_->ranks));
  return impl_->comms[static_cast<std::size_t>(rank)];
}

}  // namespace copse
