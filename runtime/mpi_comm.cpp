#include "runtime/mpi_comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <list>
#include <thread>
#include <utility>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "exec/step_executor.hpp"
#include "plan/hierarchical.hpp"
#include "plan/plan_cache.hpp"
#include "plan/planner.hpp"
#include "runtime/mpi_team_state.hpp"
#include "runtime/team_direct.hpp"
#include "runtime/team_wait.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

// How the pieces fit together: runtime/mpi_team_state.hpp. This file: Comm (its
// plans, the agreement, arrival estimates) and the collectives.

namespace {

// The agreement record, in int64: the call as rank 0 sees it (collective,
// count, piece, element bytes, datatype, root, commutative) and what rank 0
// planned for it (form, algorithm's registry index or -1 if it could not
// plan, blocks).
constexpr int kAgreeFields = 10;
constexpr int kCallFields = 7;

// With cross-memory attach, the most bytes of one piece of a collective's
// vector (allgather and reduce_scatter: of all blocks of a piece): far below
// MPI's int counts for messages between nodes, and the private working
// copies (reduce's non-roots, allgather and reduce_scatter) stay this small.
constexpr std::size_t kAttachedPieceBytes = std::size_t{256} << 20;

}  // namespace

// ---- Comm::Impl -----------------------------------------------------------------------

struct Comm::Impl {
  // One cached call (one piece: its count is per piece, per block for
  // allgather and reduce_scatter).
  struct Entry {
    bool over_internal;  // planned over the node-by-node numbering (else the communicator's)
    std::size_t element_bytes;
    std::vector<Step> steps;
    // Where rank v's block of `n` elements sits in the window's vector.
    std::size_t block_at(const TeamState& t, int v, std::uint64_t n) const {
      const int at = over_internal ? t.internal_of[static_cast<std::size_t>(v)] : v;
      return static_cast<std::size_t>(at) * static_cast<std::size_t>(n * element_bytes);
    }
  };

  TeamState* team;
  int rank;
  LinkRank link;
  std::optional<TeamDirectReduce> direct;  // when the team has a direct reduce
  MpiLink mpi;
  std::byte* window;        // in the node's segment: this rank's stage (LinkConfig::staged_sends)
  std::size_t piece_bytes;  // pieces keep every vector within this: half a window, or kAttachedPieceBytes
  // Private working memory: the working vector where the user's buffer
  // cannot serve (allgather's and reduce_scatter's block order, reduce's
  // non-roots), and the executor's scratch.
  std::vector<std::byte> work, scratch;
  PlanCache<Entry> cache;
  std::vector<Step> agree_steps;
  std::int64_t calls = 0;

  // Arrival estimates.
  ArrivalMonitor monitor;
  std::optional<ArrivalChannel> arrivals;  // when the allreduce is arrival-aware
  std::vector<Picos> predicted;            // internal order
  ArrivalKey agreed_key;
  std::vector<Picos> planned;  // copse order; empty: the last allreduce was not planned by arrival

  Impl(TeamState* t, int r)
      : team(t),
        rank(r),
        mpi(*t->channel, t->layout, r),
        window(t->window_of(r)),
        piece_bytes(t->cma ? kAttachedPieceBytes : t->window_stride / 2),
        cache(t->options.plan_cache, t->options.arrival.plans),
        monitor(t->options.arrival, t->arrival_aware) {
    if (t->arrival_aware) arrivals.emplace(*t->channel, t->layout, r);
    monitor.returned(now(), false);
    link.rank = r;
    if (t->direct)
      direct.emplace(*t->engine, *t->direct, link, t->options.wait_timeout, t->options.wait_report,
                     wait_reporter(t->options.on_wait_report));
    t->engine->set_stage(r, window, t->window_stride);
    // The agreement: a binomial broadcast of one record from rank 0, planned once.
    const AlgorithmInfo& bcast = find_algorithm(Collective::bcast, "binomial");
    const Shape shape{t->ranks, kAgreeFields, 1, t->internal_of[0]};
    compile(plan_hierarchical(t->plan, bcast, shape), true, kAgreeFields, sizeof(std::int64_t), agree_steps);
  }

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  int internal() const { return team->internal_of[static_cast<std::size_t>(rank)]; }

  Picos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - team->origin).count() * 1000;
  }

  // ---- arrival estimates (plan/arrival_monitor.hpp) ----

  // Sends this rank's value for the coming allreduce to every other rank.
  void publish(Picos value) { arrivals->publish(value); }

  // Every rank's value of this call, into `predicted` (internal order).
  void agree_arrival() {
    const int p = team->ranks;
    arrivals->post_receives();
    const CommOptions& o = team->options;
    PolledWait wait(team_wait_policy(o.wait_timeout, o.wait_report, wait_reporter(o.on_wait_report),
                                     [&] { return arrival_wait_text(calls, rank, arrivals->missing()); }));
    try {
      for (int polls = 0; !arrivals->poll(); ++polls) {
        if (team->engine->aborted()) team->rethrow_failure();
        wait.look();
        if (polls < 64)
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    } catch (...) {
      arrivals->cancel_receives();
      if (!team->engine->aborted()) team->engine->fail(std::current_exception());
      team->rethrow_failure();
    }
    predicted.resize(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r)
      predicted[static_cast<std::size_t>(team->internal_of[static_cast<std::size_t>(r)])] = arrivals->value(r);
  }

  // This rank's steps of `plan`, over internal ranks (renamed to copse ranks)
  // or over copse ranks.
  void compile(const SchedulePlan& plan, bool over_internal, std::uint64_t elements, std::size_t eb,
               std::vector<Step>& out) {
    // Scratch holds at most one receive.
    const std::uint64_t staged = compile_steps(plan, over_internal ? internal() : rank, team->ranks, elements, out);
    if (staged * eb > scratch.size()) scratch.resize(static_cast<std::size_t>(staged * eb));
    if (!over_internal || team->contiguous) return;
    for (Step& s : out) {
      if (s.send) s.send.peer = team->user_of[static_cast<std::size_t>(s.send.peer)];
      if (s.recv) s.recv.peer = team->user_of[static_cast<std::size_t>(s.recv.peer)];
    }
  }

  void run(const std::vector<Step>& steps, std::byte* y, const ReduceOp& op, Collective c) {
    LinkEngine& engine = *team->engine;
    if (engine.aborted()) team->rethrow_failure();
    link.round = calls++;
    link.activity = to_string(c);
    try {
      StepExecutor(engine, &mpi).run(link, steps, y, scratch.data(), op);
    } catch (...) {
      team->rethrow_failure();
    }
    monitor.returned(now(), false);  // a computation phase begins (an allreduce also counts its call)
  }

  // Whether collective `c` of `bytes` runs through the direct reduce: it
  // must exist and fit, and the configuration must leave the choice to the
  // selection (an algorithm named in the options runs as a schedule).
  bool direct_fits(Collective c, std::size_t bytes) const {
    return team->direct && !team->arrival_aware && DirectReduce::fits(team->ranks, bytes) &&
           team->options.leaves_choice(c);
  }

  // An allreduce (or, without an operator, a barrier) through the direct
  // reduce; failures as run()'s.
  void run_direct(Collective c, const void* send, void* recv, std::size_t count, const ReduceOp* op) {
    if (team->engine->aborted()) team->rethrow_failure();
    link.round = calls++;
    try {
      direct->run(c, send, recv, count, op);
    } catch (...) {
      team->rethrow_failure();
    }
    monitor.returned(now(), false);
  }

  // Fails the whole team with `error` (recorded, every rank aborted), then throws it.
  template <class E>
  [[noreturn]] void fail(const E& error) {
    team->engine->fail(std::make_exception_ptr(error));
    throw error;
  }

  // The plan for one piece of a call: cached, or planned after agreeing with rank 0.
  // `total` is the call's own count (for the agreement's message).
  // `warmup`, `arrival`: the warm-up's default allreduce, the agreed predictions.
  Entry& entry(Collective c, std::uint64_t total, std::uint64_t count, DType dtype, std::size_t eb, const ReduceOp* op,
               int root, bool warmup = false, const ArrivalKey* arrival = nullptr) {
    const bool commutative = op ? op->commutative : true;
    const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
    // A non-commutative operator must see the communicator's rank order,
    // which the node-by-node numbering only keeps when nodes are consecutive.
    const bool hierarchical = team->contiguous || !reduces || commutative;
    CallKey key = team->options.call_key(c, count, eb, commutative, root, warmup);
    if (!hierarchical) key.form = Form::flat;
    if (arrival && hierarchical) key.arrival = *arrival;
    if (auto* found = cache.find(key, dtype, op ? op->identity.get() : nullptr)) return found->value;
    if (team->engine->aborted()) team->rethrow_failure();
    const int p = team->ranks;
    if ((c == Collective::reduce || c == Collective::bcast) && (root < 0 || root >= p))
      throw UsageError(std::string(to_string(c)) + ": root " + std::to_string(root) + " is not a rank in [0, " +
                       std::to_string(p) + ")");
    if (reduces && op && key.algorithm != kSelectAlgorithm)
      check_operator(find_algorithm(c, key.algorithm), op->name, op->commutative);
    const Planner& planner = hierarchical ? team->planner : team->user_order;
    CallKey internal_key = key;
    if (hierarchical) internal_key.root = team->internal_of[static_cast<std::size_t>(root)];
    std::optional<CompiledPlan> plan = agree_plan(c, total, dtype, planner, internal_key);
    Entry e{hierarchical, eb, {}};
    compile(plan->plan, hierarchical, vector_elements(c, plan->shape), eb, e.steps);
    return cache.insert({key, dtype, op ? op->identity : nullptr, std::move(e)}).value;
  }

  // Rank 0 plans `key` and tells everyone what it chose (form, algorithm,
  // blocks), with its view of the call; the others check the call and
  // build that plan (the planner is deterministic, and with form, algorithm
  // and blocks given it neither selects nor tunes). A plan rank 0 cannot
  // make fails the call on every rank alike (no rank is left waiting).
  std::optional<CompiledPlan> agree_plan(Collective c, std::uint64_t total, DType dtype, const Planner& planner,
                                         CallKey key) {
    std::int64_t mine[kAgreeFields] = {static_cast<std::int64_t>(c),
                                       static_cast<std::int64_t>(total),
                                       static_cast<std::int64_t>(key.count),
                                       static_cast<std::int64_t>(key.element_bytes),
                                       static_cast<std::int64_t>(dtype),
                                       key.root,
                                       key.commutative ? 1 : 0,
                                       0,
                                       -1,
                                       0};
    std::optional<CompiledPlan> plan;
    std::string refusal;
    if (rank == 0) {
      try {
        plan = planner.plan(key);
        mine[7] = static_cast<std::int64_t>(plan->form);
        mine[8] = plan->algorithm - algorithms().data();
        mine[9] = plan->shape.blocks;
      } catch (const UsageError& e) {
        refusal = e.what();
      }
    }
    std::int64_t zeros[kAgreeFields];
    std::memcpy(zeros, mine, sizeof mine);
    ReduceOp record;
    record.name = "copy";
    record.dtype = DType::int64;
    record.element_bytes = sizeof(std::int64_t);
    run(agree_steps, reinterpret_cast<std::byte*>(zeros), record, c);
    if (!std::equal(mine, mine + kCallFields, zeros)) {
      auto call = [](const std::int64_t* f) {
        std::string text = std::string(to_string(static_cast<Collective>(f[0]))) + " of " + std::to_string(f[1]) +
                           " elements of " + std::to_string(f[3]) + " bytes (" +
                           std::string(to_string(static_cast<DType>(f[4]))) + ")";
        if (f[1] != f[2]) text += " in pieces of " + std::to_string(f[2]);
        if (f[0] == static_cast<std::int64_t>(Collective::reduce) ||
            f[0] == static_cast<std::int64_t>(Collective::bcast))
          text += ", root " + std::to_string(f[5]);
        if (!f[6]) text += ", non-commutative operator";
        return text;
      };
      fail(ScheduleError("mismatched calls: rank " + std::to_string(rank) + " calls " + call(mine) +
                         ", but rank 0 calls " + call(zeros)));
    }
    if (zeros[8] < 0)
      throw UsageError(rank == 0 ? refusal
                                 : "this " + std::string(to_string(c)) + " cannot be planned (rank 0 says why)");
    if (plan) return plan;
    key.form = static_cast<Form>(zeros[7]);
    key.algorithm = algorithms()[static_cast<std::size_t>(zeros[8])].name;
    key.blocks = static_cast<int>(zeros[9]);
    key.runtime_default = false;
    return planner.plan(key);
  }

  // Elements of `eb` bytes per piece of a vector, and per block of a piece
  // of p blocks.
  std::uint64_t piece(std::size_t eb) const {
    if (eb > piece_bytes)
      throw UsageError("an element of " + std::to_string(eb) + " bytes does not fit a piece of " +
                       std::to_string(piece_bytes) + " bytes");
    return eb == 0 ? 1 : piece_bytes / eb;
  }
  std::uint64_t block_piece(std::size_t eb) const {
    const std::uint64_t per = eb == 0 ? 1 : piece_bytes / (eb * static_cast<std::uint64_t>(team->ranks));
    if (per == 0)
      throw UsageError("a window of " + std::to_string(team->window_stride) + " bytes is too small for blocks of " +
                       std::to_string(eb) + "-byte elements from " + std::to_string(team->ranks) +
                       " ranks: set window_bytes to at least " + std::to_string(2 * eb * team->ranks));
    return per;
  }

  // Private working memory of at least `bytes`.
  std::byte* work_vector(std::size_t bytes) {
    if (work.size() < std::max<std::size_t>(bytes, 1)) work.resize(std::max<std::size_t>(bytes, 1));
    return work.data();
  }

  static ReduceOp data_op(DType dtype, std::size_t eb) {
    ReduceOp op;
    op.name = "copy";
    op.dtype = dtype;
    op.element_bytes = eb;
    return op;
  }

  // Reduce-scatter over blocks of `block` elements; rank v's block holds
  // counts[v] elements of `in` from displs[v] (the rest is padding).
  void reduce_scatter_blocks(const std::byte* in, std::byte* out, const std::vector<std::uint64_t>& counts,
                             const std::vector<std::uint64_t>& displs, std::uint64_t block, const ReduceOp& op);
};

// ---- Team (its set-up and what the set-up found: runtime/mpi_setup.cpp) -----------------------------

namespace {
// The team's planners, once set up: over the node-by-node numbering with the
// hierarchy planned from the processes' bindings, and flat over the
// communicator's order.
void make_planners(TeamState& t) {
  PlanContext context;
  context.layout = t.plan_nodes;
  context.model = t.options.model;
  context.grouping = t.options.grouping;
  (t.plan->multi_leader ? context.multi_leader : context.leader) = t.plan;
  t.planner = Planner(std::move(context));
  PlanContext flat;
  flat.layout = RankMap::from_nodes(t.layout.node_table());
  flat.model = t.options.model;
  t.user_order = Planner(std::move(flat));
}
}  // namespace

Team::Team(MPI_Comm comm, CommOptions options, int threads) : impl_(std::make_unique<Impl>()) {
  // The set-up plans the configured form's hierarchy (multi_leader: its
  // flag); the planner composes the other forms with it where they can.
  options.multi_leader = options.form_in_effect() == Form::multi_leader;
  impl_->options = std::move(options);
  impl_->set_up(comm, threads);
  const std::vector<int> sizes = impl_->plan_nodes.node_sizes();
  if (impl_->options.form_falls_back && impl_->options.form_in_effect() == Form::lanes &&
      std::ranges::adjacent_find(sizes, std::not_equal_to<>()) != sizes.end())
    impl_->options.form = Form::leader;
  make_planners(*impl_);
  impl_->comms.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
    impl_->comms.push_back(Comm(std::make_unique<Comm::Impl>(impl_.get(), impl_->first_rank + t)));
}

// ---- Comm -----------------------------------------------------------------------------------

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;
Comm::Comm(Comm&&) noexcept = default;

int Comm::rank() const { return impl_->rank; }
int Comm::size() const { return impl_->team->ranks; }
std::size_t Comm::cached_plans() const { return impl_->cache.size(); }

namespace {

const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }
std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}

// Calls body(offset, n) for consecutive pieces of at most `piece` of
// `count` elements -- once, with n = 0, for an empty vector, so that every
// rank runs (and agrees on) the same calls.
template <class Body>
void in_pieces(std::uint64_t count, std::uint64_t piece, Body&& body) {
  std::uint64_t offset = 0;
  do {
    const std::uint64_t n = std::min(piece, count - offset);
    body(offset, n);
    offset += n;
  } while (offset < count);
}

}  // namespace

void Comm::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  Impl& m = *impl_;
  const std::size_t eb = op.element_bytes;
  if (m.direct_fits(Collective::allreduce, count * eb)) {
    m.run_direct(Collective::allreduce, send, recv, count, &op);
    m.monitor.returned(m.now(), true);
    return;
  }
  const std::byte* in = send == recv ? bytes_of(recv) : bytes_of(send);
  bool warmup = false;
  const ArrivalKey* key = nullptr;
  if (m.team->arrival_aware) {  // plan/arrival_monitor.hpp
    const std::int64_t call = m.monitor.call();
    const Picos begin = m.monitor.estimator().phase_begin();
    if (auto value = m.monitor.arrive(m.now())) m.publish(*value - begin);
    if (m.monitor.planned_by_arrival(call)) {
      m.agree_arrival();
      arrival_key(m.predicted, m.team->options.arrival.resolution, m.agreed_key);
      key = &m.agreed_key;
      const std::vector<Picos> internal = arrival_of(m.agreed_key);
      m.planned.resize(internal.size());
      for (std::size_t r = 0; r < internal.size(); ++r)
        m.planned[r] = internal[static_cast<std::size_t>(m.team->internal_of[r])];
    } else {
      warmup = true;
      m.planned.clear();
    }
  }
  in_pieces(count, m.piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::allreduce, count, n, op.dtype, eb, &op, 0, warmup, key);
    // The user's receive buffer is the working vector.
    std::byte* y = bytes_of(recv) + at * eb;
    copy_bytes(y, in + at * eb, n * eb);
    m.run(e.steps, y, op, Collective::allreduce);
  });
  m.monitor.returned(m.now(), true);
}

void Comm::edge(double fraction) {
  Impl& m = *impl_;
  if (auto value = m.monitor.edge(m.now(), fraction)) m.publish(*value - m.monitor.estimator().phase_begin());
}

const std::vector<Picos>& Comm::planned_arrival() const { return impl_->planned; }

void Comm::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  Impl& m = *impl_;
  const std::size_t eb = op.element_bytes;
  in_pieces(count, m.piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::reduce, count, n, op.dtype, eb, &op, root);
    // The root works in its receive buffer, the others in private memory.
    std::byte* y = m.rank == root ? bytes_of(recv) + at * eb : m.work_vector(n * eb);
    copy_bytes(y, bytes_of(send) + at * eb, n * eb);
    m.run(e.steps, y, op, Collective::reduce);
  });
}

void Comm::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  Impl& m = *impl_;
  const std::size_t eb = dtype_size(dtype);
  const ReduceOp op = Impl::data_op(dtype, eb);
  in_pieces(count, m.piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::bcast, count, n, dtype, eb, nullptr, root);
    m.run(e.steps, bytes_of(buffer) + at * eb, op, Collective::bcast);
  });
}

void Comm::barrier() {
  // One element of zero bytes: the schedule's messages carry no data.
  Impl& m = *impl_;
  if (m.direct_fits(Collective::barrier, 0)) return m.run_direct(Collective::barrier, nullptr, nullptr, 0, nullptr);
  auto& e = m.entry(Collective::barrier, 1, 1, DType::uint8, 0, nullptr, 0);
  m.run(e.steps, m.work_vector(0), Impl::data_op(DType::uint8, 0), Collective::barrier);
}

void Comm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  Impl& m = *impl_;
  const std::size_t eb = dtype_size(dtype);
  const ReduceOp op = Impl::data_op(dtype, eb);
  const auto p = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank());
  // In place: the contribution is already at its block of recv.
  const std::byte* mine = send == recv ? bytes_of(recv) + me * count * eb : bytes_of(send);
  in_pieces(count, m.block_piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::allgather, count, n, dtype, eb, nullptr, 0);
    // Blocks sit in the schedule's order in the window.
    // The user's receive buffer is the working vector when its blocks are
    // in the schedule's order and the call runs in one piece.
    const bool direct = n == count && (m.team->contiguous || !e.over_internal);
    std::byte* y = direct ? bytes_of(recv) : m.work_vector(p * n * eb);
    copy_bytes(y + e.block_at(*m.team, rank(), n), mine + at * eb, n * eb);
    m.run(e.steps, y, op, Collective::allgather);
    if (!direct)
      for (std::size_t v = 0; v < p; ++v)
        copy_bytes(bytes_of(recv) + (v * count + at) * eb, y + e.block_at(*m.team, static_cast<int>(v), n), n * eb);
  });
}

void Comm::Impl::reduce_scatter_blocks(const std::byte* in, std::byte* out, const std::vector<std::uint64_t>& counts,
                                       const std::vector<std::uint64_t>& displs, std::uint64_t block,
                                       const ReduceOp& op) {
  const std::size_t eb = op.element_bytes;
  const auto me = static_cast<std::size_t>(rank);
  in_pieces(block, block_piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::reduce_scatter, block, n, op.dtype, eb, &op, 0);
    std::byte* y = work_vector(counts.size() * n * eb);
    for (std::size_t v = 0; v < counts.size(); ++v) {
      const std::uint64_t real = counts[v] > at ? std::min(n, counts[v] - at) : 0;
      std::byte* to = y + e.block_at(*team, static_cast<int>(v), n);
      copy_bytes(to, in + (displs[v] + at) * eb, real * eb);
      if (real < n) std::memset(to + real * eb, 0, (n - real) * eb);  // padding: combined, never read
    }
    run(e.steps, y, op, Collective::reduce_scatter);
    // In place, this overwrites input only where this piece has read it.
    const std::uint64_t real = counts[me] > at ? std::min(n, counts[me] - at) : 0;
    copy_bytes(out + at * eb, y + e.block_at(*team, rank, n), real * eb);
  });
}

void Comm::reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  const auto p = static_cast<std::size_t>(size());
  std::vector<std::uint64_t> counts(p, count), displs(p);
  for (std::size_t v = 0; v < p; ++v) displs[v] = v * count;
  impl_->reduce_scatter_blocks(send == recv ? bytes_of(recv) : bytes_of(send), bytes_of(recv), counts, displs, count,
                               op);
}

void Comm::reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  const auto p = static_cast<std::size_t>(size());
  std::vector<std::uint64_t> sizes(p), displs(p);
  std::uint64_t block = 0, at = 0;
  for (std::size_t v = 0; v < p; ++v) {
    if (counts[v] < 0) throw UsageError("reduce_scatter: rank " + std::to_string(v) + "'s count is negative");
    sizes[v] = static_cast<std::uint64_t>(counts[v]);
    displs[v] = at;
    at += sizes[v];
    block = std::max(block, sizes[v]);
  }
  impl_->reduce_scatter_blocks(send == recv ? bytes_of(recv) : bytes_of(send), bytes_of(recv), sizes, displs, block,
                               op);
}

}  // namespace copse::mpi
