#include "node/comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string_view>
#include <utility>

#include "common/error.hpp"
#include "internode/registry.hpp"
#include "internode/simulator.hpp"
#include "intranode/arena.hpp"
#include "intranode/direct_reduce.hpp"
#include "intranode/link_engine.hpp"
#include "intranode/step_executor.hpp"
#include "node/hierarchical.hpp"
#include "node/team_direct.hpp"
#include "node/team_plan.hpp"
#include "node/team_wait.hpp"

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
//  - Arrival-aware allreduces (slt, prr; node/arrival_monitor.hpp): the
//    ranks' predictions meet on the team's ArrivalBoard; each call waits for
//    all of them, compresses them into an ArrivalKey and plans per key. Those
//    plans are bounded: at most ArrivalOptions::plans keys per shape, in the
//    team's list and in each rank's cache alike (least recently used go
//    first), and a rank's keyed entries share one scratch area. A plan is a
//    pure function of its key, so evicting on one rank and not another never
//    makes two ranks run different schedules. During the warm-up the same
//    calls run the team's default allreduce (entries keyed by that
//    algorithm).
//  - Block counts (options.blocks == 0): autotuned with best_blocks on the
//    inter-node algorithm itself, flat over all the team's ranks with the
//    team's node map and cost model. The hierarchical schedule pipelines
//    the same blocks through the groups, so the flat optimum is a fair
//    stand-in, and best_blocks stays the one autotuner.

namespace {

// A shape's team-wide plan.
struct SharedShape {
  Collective collective;
  std::uint64_t count;
  std::size_t element_bytes;
  int root;
  const AlgorithmInfo* forced;  // the warm-up's default algorithm, or null: the configured one
  bool commutative;             // the operator's (true for collectives without one)
  const AlgorithmInfo* inter;
  std::optional<ArrivalKey> key;  // planned from these predictions
  Shape shape;
  SchedulePlan plan;
};

using Clock = std::chrono::steady_clock;

// What a Comm needs of its team (Team::Impl is private to Team).
struct TeamState {
  TeamOptions options;
  std::shared_ptr<const HierarchyPlan> plan;
  int ranks = 0;
  HeapArena arena;
  std::unique_ptr<LinkEngine> engine;
  // One node without a virtual clock: small allreduces and barriers in one
  // round through shared slots (intranode/direct_reduce.hpp), where the
  // selection would choose; null otherwise.
  std::unique_ptr<DirectReduce> direct;

  std::mutex shapes_mutex;
  std::vector<std::shared_ptr<const SharedShape>> shapes;  // keyed ones: least recently used first

  // Arrival estimates: set when the configured allreduce is arrival-aware.
  std::unique_ptr<ArrivalBoard> board;
  const AlgorithmInfo* warmup_allreduce = nullptr;  // the team's default, run during the warm-up
  Clock::time_point origin = Clock::now();

  std::mutex error_mutex;
  std::exception_ptr error;  // the first failure; every aborted rank rethrows it

  // The team's plan of a shape, run with `forced` (or the configured
  // algorithm) and, with a key, planned from its predictions.
  std::shared_ptr<const SharedShape> shared_shape(Collective c, std::uint64_t count, std::size_t element_bytes,
                                                  int root, bool commutative, const AlgorithmInfo* forced,
                                                  const ArrivalKey* key) {
    std::lock_guard<std::mutex> lock(shapes_mutex);
    auto same_shape = [&](const SharedShape& s) {
      return s.collective == c && s.count == count && s.element_bytes == element_bytes && s.root == root &&
             s.commutative == commutative && s.forced == forced;
    };
    for (auto it = shapes.begin(); it != shapes.end(); ++it)
      if (same_shape(**it) && (key ? (*it)->key == *key : !(*it)->key)) {
        if (!key) return *it;
        std::rotate(it, it + 1, shapes.end());  // most recently used last
        return shapes.back();
      }
    // One node, the default algorithm: the selection's flat algorithm where
    // it beats the hierarchy's phases (team_plan.hpp), as the MPI Team does.
    const RankMap layout = RankMap::from_nodes(plan->node_of);
    const AlgorithmInfo* flat = forced || key ? nullptr
                                              : one_node_choice(c, layout, count, element_bytes,
                                                                algorithm_name(options, c), commutative, options.model);
    const AlgorithmInfo& inter = flat ? *flat : forced ? *forced : find_algorithm(c, algorithm_name(options, c));
    Shape shape{ranks, count, 1, root};
    if (key) {
      SimulationOptions model;
      model.model = options.model;
      model.element_bytes = std::max<std::size_t>(element_bytes, 1);
      shape.hints = planning_hints(model, arrival_of(*key));
    }
    validate_shape(inter, shape);
    shape.blocks = team_blocks(inter, shape, options.blocks, options.model, layout, element_bytes);
    auto s = std::make_shared<SharedShape>();
    *s = SharedShape{c, count, element_bytes, root, forced, commutative, &inter, {}, shape, {}};
    if (key) s->key = *key;
    s->plan = flat ? inter.plan(shape) : plan_hierarchical(plan, inter, shape);
    shapes.push_back(s);
    if (key) {  // bounded: the least recently used key of this shape goes (ranks that run it keep their copy)
      std::size_t keyed = 0;
      for (const auto& x : shapes) keyed += same_shape(*x) && x->key ? 1 : 0;
      for (auto it = shapes.begin(); keyed > options.arrival.plans && it != shapes.end();)
        if (same_shape(**it) && (*it)->key) {
          it = shapes.erase(it);
          --keyed;
        } else {
          ++it;
        }
    }
    return s;
  }

  void record(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!error) error = std::move(e);
  }
  [[noreturn]] void rethrow_failure() {
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(error_mutex);
      e = error;
    }
    if (e) std::rethrow_exception(e);
    throw LinkAborted();
  }
};

}  // namespace

// ---- Comm -------------------------------------------------------------------------

struct Comm::Impl {
  // One cached shape on this rank.
  struct Entry {
    Collective collective;
    std::uint64_t count;
    DType dtype;
    std::size_t element_bytes;
    std::shared_ptr<const void> op_identity;  // held, so that the address is not reused while cached
    bool commutative;
    int root;
    const AlgorithmInfo* forced;  // see SharedShape
    std::optional<ArrivalKey> key;
    std::uint64_t used = 0;  // keyed entries: when last used (least recently used go first)
    std::shared_ptr<const SharedShape> shared;
    std::vector<Step> steps;
    std::byte* scratch = nullptr;  // staging for steps whose send and receive overlap (keyed: arrival_scratch)
    std::byte* work = nullptr;     // reduce, reduce_scatter: the working copy of send
    ReduceOp data_op;              // bcast, allgather, barrier: element size only (replace never combines)
  };

  TeamState* team;
  int rank;
  LinkRank link;
  std::optional<TeamDirectReduce> direct;  // when the team has a direct reduce
  std::int64_t calls = 0;
  Picos last_time = 0;
  std::vector<std::unique_ptr<Entry>> cache;
  Entry* last = nullptr;

  ArrivalMonitor monitor;
  std::vector<Picos> predicted;  // the board's vector for the current call
  ArrivalKey agreed_key;         // ... compressed
  std::vector<Picos> planned;    // what the last allreduce was planned from (empty: not by arrival)
  std::uint64_t uses = 0;
  std::byte* arrival_scratch = nullptr;  // shared by this rank's keyed entries
  std::size_t arrival_scratch_bytes = 0;

  Impl(TeamState* t, int r) : team(t), rank(r), monitor(t->options.arrival, static_cast<bool>(t->board)) {
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

  // `op` is the reduction operator, or null for the collectives that only
  // move data (bcast, allgather, barrier).
  // `forced`, `key`: as SharedShape's (null: the configured algorithm, not by arrival).
  Entry& entry(Collective c, std::uint64_t count, DType dtype, std::size_t element_bytes, const ReduceOp* op, int root,
               const AlgorithmInfo* forced = nullptr, const ArrivalKey* key = nullptr) {
    const void* identity = op ? op->identity.get() : nullptr;
    const bool commutative = op ? op->commutative : true;
    auto matches = [&](const Entry& e) {
      return e.collective == c && e.count == count && e.dtype == dtype && e.element_bytes == element_bytes &&
             e.root == root && e.op_identity.get() == identity && e.commutative == commutative && e.forced == forced &&
             (key ? e.key == *key : !e.key);
    };
    Entry* found = nullptr;
    if (last && matches(*last)) found = last;
    for (std::size_t i = 0; !found && i < cache.size(); ++i)
      if (matches(*cache[i])) found = cache[i].get();
    if (!found) found = &plan_entry(c, count, dtype, element_bytes, op, root, forced, key);
    found->used = ++uses;
    return *(last = found);
  }

  // First call of a shape on this rank: plan (team-wide, once), materialise
  // this rank's steps, carve its scratch from the arena.
  Entry& plan_entry(Collective c, std::uint64_t count, DType dtype, std::size_t element_bytes, const ReduceOp* op,
                    int root, const AlgorithmInfo* forced, const ArrivalKey* key) {
    if (team->engine->aborted()) team->rethrow_failure();
    const int p = team->ranks;
    if ((c == Collective::reduce || c == Collective::bcast) && (root < 0 || root >= p))
      throw UsageError(std::string(to_string(c)) + ": root " + std::to_string(root) + " is not a rank in [0, " +
                       std::to_string(p) + ")");
    const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
    const std::shared_ptr<const SharedShape> held =
        team->shared_shape(c, count, element_bytes, root, op ? op->commutative : true, forced, key);
    const SharedShape& shared = *held;
    if (reduces && op) check_operator(*shared.inter, op->name, op->commutative);
    auto e = std::make_unique<Entry>();
    e->collective = c;
    e->count = count;
    e->dtype = dtype;
    e->element_bytes = element_bytes;
    e->op_identity = op ? op->identity : nullptr;
    e->commutative = op ? op->commutative : true;
    e->root = root;
    e->forced = forced;
    if (key) e->key = *key;
    e->shared = held;
    const std::uint64_t elements = vector_elements(c, shared.shape);
    const std::uint64_t staging = compile_steps(shared.plan, rank, p, elements, e->steps);
    const std::size_t eb = c == Collective::barrier ? 0 : element_bytes;
    if (key) {
      if (staging * eb > arrival_scratch_bytes) {
        arrival_scratch_bytes = staging * eb;
        arrival_scratch = team->arena.address(team->arena.allocate(arrival_scratch_bytes, 64));
      }
    } else if (staging * eb > 0) {
      e->scratch = team->arena.address(team->arena.allocate(staging * eb, 64));
    }
    if ((c == Collective::reduce || c == Collective::reduce_scatter) && elements * eb > 0)
      e->work = team->arena.address(team->arena.allocate(elements * eb, 64));
    e->data_op.name = "copy";
    e->data_op.dtype = dtype;
    e->data_op.element_bytes = eb;
    cache.push_back(std::move(e));
    Entry& made = *cache.back();
    if (key) evict_keyed(made);
    return made;
  }

  // At most ArrivalOptions::plans keyed entries of `fresh`'s shape stay.
  void evict_keyed(const Entry& fresh) {
    auto same = [&](const Entry& e) {
      return e.key && e.collective == fresh.collective && e.count == fresh.count && e.dtype == fresh.dtype &&
             e.element_bytes == fresh.element_bytes && e.root == fresh.root && e.op_identity == fresh.op_identity &&
             e.commutative == fresh.commutative;
    };
    for (;;) {
      std::size_t keyed = 0;
      auto oldest = cache.end();
      for (auto it = cache.begin(); it != cache.end(); ++it)
        if (same(**it) && it->get() != &fresh) {
          ++keyed;
          if (oldest == cache.end() || (*it)->used < (*oldest)->used) oldest = it;
        }
      if (keyed + 1 <= team->options.arrival.plans) return;
      if (last == oldest->get()) last = nullptr;
      cache.erase(oldest);
    }
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
    link.activity = to_string(e.collective);
    link.clock.reset();
    try {
      StepExecutor(engine).run(link, e.steps, y, e.key ? arrival_scratch : e.scratch, op, nullptr, input);
    } catch (...) {
      // Aborted by another rank, or failed here (recorded before the abort):
      // either way every rank reports the team's first failure.
      team->rethrow_failure();
    }
    last_time = link.clock.now();
    monitor.returned(now(), e.collective == Collective::allreduce);  // the next computation phase begins
  }

  // Whether collective `c` of `bytes` runs through the team's direct reduce
  // (small vectors through its slots, large ones in slices: `sliced`): it
  // must exist and take the size, and the configuration must leave the
  // choice to the selection (an algorithm named in the options runs as a
  // schedule).
  bool direct_fits(Collective c, std::size_t bytes, bool sliced = false) const {
    return team->direct &&
           (sliced ? DirectReduce::slices(team->ranks, bytes) : DirectReduce::fits(team->ranks, bytes)) &&
           algorithm_name(team->options, c) == default_algorithm_name(c);
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
  Impl::Entry* e = nullptr;
  if (me.team->board) {  // arrival-aware (node/arrival_monitor.hpp)
    const std::int64_t call = me.monitor.call();
    if (auto value = me.monitor.arrive(me.now())) me.team->board->publish(me.rank, call, *value);
    if (me.monitor.planned_by_arrival(call)) {
      me.agree(call);
      arrival_key(me.predicted, me.team->options.arrival.resolution, me.agreed_key);
      e = &me.entry(Collective::allreduce, count, op.dtype, op.element_bytes, &op, 0, nullptr, &me.agreed_key);
      me.planned = e->shared->shape.hints->arrival;
    } else {
      e = &me.entry(Collective::allreduce, count, op.dtype, op.element_bytes, &op, 0, me.team->warmup_allreduce);
      me.planned.clear();
    }
  } else if (me.direct_fits(Collective::allreduce, count * op.element_bytes)) {
    me.run_direct(Collective::allreduce, send, recv, count, &op);
    return;
  } else if (me.direct_fits(Collective::allreduce, count * op.element_bytes, true)) {
    me.run_direct(Collective::allreduce, send, recv, count, &op, true);
    return;
  } else {
    e = &me.entry(Collective::allreduce, count, op.dtype, op.element_bytes, &op, 0);
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
  auto& e = impl_->entry(Collective::reduce, count, op.dtype, op.element_bytes, &op, root);
  const std::size_t bytes = count * op.element_bytes;
  impl_->run(e, e.work, op, input_of(send, e.work, count));
  if (rank() == root) copy(recv, e.work, bytes);
}

void Comm::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  auto& e = impl_->entry(Collective::bcast, count, dtype, dtype_size(dtype), nullptr, root);
  impl_->run(e, bytes_of(buffer), e.data_op);
}

void Comm::barrier() {
  if (impl_->direct_fits(Collective::barrier, 0))
    return impl_->run_direct(Collective::barrier, nullptr, nullptr, 0, nullptr);
  // One element of zero bytes: the schedule's messages carry no data, only
  // the rendezvous (and alpha on the virtual clock).
  auto& e = impl_->entry(Collective::barrier, 1, DType::uint8, 0, nullptr, 0);
  alignas(64) static std::byte nothing[64];
  impl_->run(e, nothing, e.data_op);
}

void Comm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  auto& e = impl_->entry(Collective::allgather, count, dtype, dtype_size(dtype), nullptr, 0);
  const std::size_t bytes = count * dtype_size(dtype);
  // In place (send == recv): the contribution is already at its block.
  if (send != recv) copy(bytes_of(recv) + static_cast<std::size_t>(rank()) * bytes, send, bytes);
  impl_->run(e, bytes_of(recv), e.data_op);
}

void Comm::reduce_scatter(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  auto& e = impl_->entry(Collective::reduce_scatter, count, op.dtype, op.element_bytes, &op, 0);
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
  if (options.wait_timeout && options.wait_timeout->count() <= 0)
    throw UsageError("the team's wait timeout must be positive");
  if (options.wait_report.count() < 0) throw UsageError("the team's wait report interval must not be negative");
  if (options.nodes.empty()) {
    if (options.ranks < 1) throw UsageError("a team needs at least one rank, got " + std::to_string(options.ranks));
    options.nodes.push_back(NodeSpec{Machine::detect(), options.ranks, {}});
  }
  t.options = std::move(options);
  t.plan = std::make_shared<const HierarchyPlan>(
      plan_hierarchy(t.options.nodes, t.options.grouping, t.options.multi_leader));
  t.ranks = t.plan->ranks;
  if (t.plan->first_rank.size() > 1 && t.options.model.levels() < 2)
    throw UsageError("the cost model needs a link level for other nodes (level 1)");
  // Unknown algorithm names are refused now, not at the first call.
  for (Collective c : all_collectives()) (void)find_algorithm(c, algorithm_name(t.options, c));
  check_arrival_options(t.options.arrival);
  if (find_algorithm(Collective::allreduce, t.options.allreduce).arrival_aware) {
    t.board = std::make_unique<ArrivalBoard>(t.ranks);
    t.warmup_allreduce = &find_algorithm(Collective::allreduce, team_defaults::allreduce);
  }

  TeamState* state = &t;
  t.engine = std::make_unique<LinkEngine>(
      t.arena, LinkEngine::create_shared(t.arena, t.ranks),
      executor_config(RankMap::from_nodes(t.plan->node_of),
                      t.options.virtual_clock ? std::optional(t.options.model) : std::nullopt,
                      team_waits(t.options.wait_timeout, t.options.wait_report, t.options.on_wait_report),
                      [state](std::exception_ptr e) { state->record(std::move(e)); }));
  if (!t.options.virtual_clock && t.plan->first_rank.size() == 1 && DirectReduce::serves(t.ranks))
    t.direct = std::make_unique<DirectReduce>(t.arena, DirectReduce::create_shared(t.arena, t.ranks), t.ranks,
                                              t.engine->spin_policy());

  t.comms.reserve(static_cast<std::size_t>(t.ranks));
  for (int r = 0; r < t.ranks; ++r) t.comms.push_back(Comm(std::make_unique<Comm::Impl>(&t, r)));
}

Team::~Team() = default;

int Team::size() const { return impl_->ranks; }
const HierarchyPlan& Team::plan() const { return *impl_->plan; }

Comm& Team::comm(int rank) {
  if (rank < 0 || rank >= impl_->ranks)
    throw UsageError("rank " + std::to_string(rank) + " is not in this team of " + std::to_string(impl_->ranks));
  return impl_->comms[static_cast<std::size_t>(rank)];
}

}  // namespace copse
