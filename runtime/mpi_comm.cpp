#include "runtime/mpi_comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
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
#include "runtime/rank_core.hpp"
#include "runtime/team_wait.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

// How the pieces fit together: runtime/mpi_team_state.hpp. This file: a
// process's thread rank over the runtime core (runtime/rank_core.hpp) -- its
// plans' agreement, its arrival channel, its working memory and pieces --
// and the collectives' buffer strategies.

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

// ---- MpiRank -----------------------------------------------------------------------

// One thread rank of this process: the core, with its MPI link, its window,
// private working memory and its plans' agreement with rank 0.
struct MpiRank final : RankCore {
  // One cached call (one piece: its count is per piece, per block for
  // allgather and reduce_scatter).
  struct Entry {
    bool over_internal;  // planned over the node-by-node numbering (else the communicator's)
    std::size_t element_bytes;
    std::shared_ptr<const CompiledPlan> plan;  // as agreed (Team::compiled_plan)
    std::vector<Step> steps;
    // Where rank v's block of `n` elements sits in the window's vector.
    std::size_t block_at(const TeamState& t, int v, std::uint64_t n) const {
      const int at = over_internal ? t.internal(v) : v;
      return static_cast<std::size_t>(at) * static_cast<std::size_t>(n * element_bytes);
    }
  };

  TeamState* team;
  MpiLink mpi;
  std::byte* window;        // in the node's segment: this rank's stage (LinkConfig::staged_sends)
  std::size_t piece_bytes;  // pieces keep every vector within this: half a window, or kAttachedPieceBytes
  // Private working memory: the working vector where the user's buffer
  // cannot serve (allgather's and reduce_scatter's block order, reduce's
  // non-roots), and the executor's scratch.
  std::vector<std::byte> work, scratch;
  PlanCache<Entry> cache;
  std::vector<Step> agree_steps;
  std::optional<ArrivalChannel> arrivals;  // when the allreduce is arrival-aware

  MpiRank(TeamState* t, int r)
      : RankCore(*t, r),
        team(t),
        mpi(*t->channel, t->layout, r),
        window(t->window_of(r)),
        piece_bytes(t->cma ? kAttachedPieceBytes : t->window_stride / 2),
        cache(t->options.plan_cache, t->options.arrival.plans) {
    if (t->arrival_aware) arrivals.emplace(*t->channel, t->layout, r);
    t->engine->set_stage(r, window, t->window_stride);
    // The agreement: a binomial broadcast of one record from rank 0, planned once.
    const AlgorithmInfo& bcast = find_algorithm(Collective::bcast, "binomial");
    const Shape shape{t->ranks, kAgreeFields, 1, t->internal(0)};
    compile(plan_hierarchical(t->plan, bcast, shape), true, kAgreeFields, sizeof(std::int64_t), agree_steps);
  }

  std::size_t cached_plans() const override { return cache.size(); }
  std::shared_ptr<const CompiledPlan> cached_plan(const CallKey& key) const {
    const auto* item = cache.peek(key);
    return item ? item->value.plan : nullptr;
  }

  // ---- arrival estimates (plan/arrival_monitor.hpp): the channel ----

  // Sends this rank's predicted phase length to every other rank (hosts'
  // clocks need not agree; the previous returns are close).
  void publish(std::int64_t, Picos value) override { arrivals->publish(value - monitor.estimator().phase_begin()); }
  void collect(std::int64_t, const std::function<void()>& look) override {
    arrivals->post_receives();
    for (int polls = 0; !arrivals->poll(); ++polls) {
      look();
      if (polls < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    predicted.resize(static_cast<std::size_t>(team->ranks));
    for (int r = 0; r < team->ranks; ++r) predicted[static_cast<std::size_t>(team->internal(r))] = arrivals->value(r);
  }
  std::vector<int> missing(std::int64_t) override { return arrivals->missing(); }
  void cancel_collect() noexcept override { arrivals->cancel_receives(); }

  // This rank's steps of `plan`, over internal ranks (renamed to copse ranks)
  // or over copse ranks.
  void compile(const SchedulePlan& plan, bool over_internal, std::uint64_t elements, std::size_t eb,
               std::vector<Step>& out) {
    const bool renamed = over_internal && !team->contiguous;
    auto copse_rank = [&](int peer) { return renamed ? team->user_of[static_cast<std::size_t>(peer)] : peer; };
    // Scratch holds at most one receive: one the executor stages, over the
    // links it runs them on (MPI's combining receives among them).
    const StepExecutor executor(*team->engine, &mpi);
    const std::uint64_t staged =
        compile_steps(plan, over_internal ? team->internal(rank) : rank, team->ranks, elements, out,
                      [&](int peer) { return executor.combines_in_place(rank, copse_rank(peer)); });
    if (staged * eb > scratch.size()) scratch.resize(static_cast<std::size_t>(staged * eb));
    if (!renamed) return;
    for (Step& s : out) {
      if (s.send) s.send.peer = copse_rank(s.send.peer);
      if (s.recv) s.recv.peer = copse_rank(s.recv.peer);
    }
  }

  void run(const std::vector<Step>& steps, std::byte* y, const ReduceOp& op, Collective c, RunInput input = {}) {
    RankCore::run(steps, y, scratch.data(), op, c, &mpi, input);
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
    // which the node-by-node numbering only keeps when nodes are consecutive;
    // a collective planned flat in every form (has_hierarchy) is planned
    // over that order too, so that its blocks need no renumbering.
    const bool hierarchical = (team->contiguous || !reduces || commutative) && has_hierarchy(c);
    CallKey key = team->options.call_key(c, count, eb, commutative, root, warmup);
    if (!hierarchical && has_hierarchy(c)) key.form = Form::flat;
    if (arrival && hierarchical) key.arrival = *arrival;
    return cached(cache, key, dtype, op, [&] {
      const Planner& planner = hierarchical ? team->planner : team->user_order;
      CallKey internal_key = key;
      if (hierarchical) internal_key.root = team->internal(root);
      Entry e{hierarchical,
              eb,
              std::make_shared<const CompiledPlan>(agree_plan(c, total, dtype, planner, internal_key)),
              {}};
      compile(e.plan->plan, hierarchical, vector_elements(c, e.plan->shape), eb, e.steps);
      return e;
    });
  }

  CompiledPlan agree_plan(Collective c, std::uint64_t total, DType dtype, const Planner& planner, CallKey key);

  // Elements of `eb` bytes per piece of a vector, and per block of a piece
  // of p blocks
  std::uint64_t piece(std::size_t eb) const {
    if (eb > piece_bytes)
      throw UsageError("an element of " + std::to_string(eb) + " bytes does not fit a piece of " +
                       std::to_string(piece_bytes) + " bytes");
    return eb == 0 ? 1 : piece_bytes / eb;
  }
  // (`areas` vectors of p blocks: alltoall's two).
  std::uint64_t block_piece(std::size_t eb, std::uint64_t areas = 1) const {
    const std::uint64_t blocks = areas * static_cast<std::uint64_t>(team->ranks);
    const std::uint64_t per = eb == 0 ? 1 : piece_bytes / (eb * blocks);
    if (per == 0)
      throw UsageError("a window of " + std::to_string(team->window_stride) + " bytes is too small for blocks of " +
                       std::to_string(eb) + "-byte elements from " + std::to_string(team->ranks) +
                       " ranks: set window_bytes to at least " + std::to_string(2 * eb * blocks));
    return per;
  }

  // Private working memory of at least `bytes`.
  std::byte* work_vector(std::size_t bytes) {
    if (work.size() < std::max<std::size_t>(bytes, 1)) work.resize(std::max<std::size_t>(bytes, 1));
    return work.data();
  }

  // Reduce-scatter over the blocks of `b` (rank v's: b.counts[v] elements
  // of `in` from b.displs[v], padded to b.block).
  void reduce_scatter_blocks(const std::byte* in, std::byte* out, const BlockCounts& b, const ReduceOp& op);

  // ---- the collectives ----
  void allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) override;
  void reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) override;
  void bcast(void* buffer, std::size_t count, DType dtype, int root) override;
  void barrier() override;
  void allgather(const void* send, void* recv, std::size_t count, DType dtype) override;
  void reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) override {
    if (reduce_scatter_block_direct(send, recv, count, op)) return;
    reduce_scatter_blocks(bytes_of(send == recv ? recv : send), bytes_of(recv),
                          BlockCounts::uniform(team->ranks, count), op);
  }
  void reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) override {
    const BlockCounts blocks = BlockCounts::of(counts, team->ranks);
    if (reduce_scatter_direct(send, recv, blocks, op)) return;
    reduce_scatter_blocks(bytes_of(send == recv ? recv : send), bytes_of(recv), blocks, op);
  }
  void move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) override;
};

// Rank 0 plans `key` and tells everyone what it chose (form, algorithm,
// blocks), with its view of the call; the others check the call and
// build that plan (the planner is deterministic, and with form, algorithm
// and blocks given it neither selects nor tunes). A plan rank 0 cannot
// make fails the call on every rank alike (no rank is left waiting).
CompiledPlan MpiRank::agree_plan(Collective c, std::uint64_t total, DType dtype, const Planner& planner, CallKey key) {
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
  const ReduceOp record = data_op(DType::int64, sizeof(std::int64_t));
  run(agree_steps, reinterpret_cast<std::byte*>(zeros), record, c);
  if (!std::equal(mine, mine + kCallFields, zeros)) {
    auto call = [](const std::int64_t* f) {
      std::string text = std::string(to_string(static_cast<Collective>(f[0]))) + " of " + std::to_string(f[1]) +
                         " elements of " + std::to_string(f[3]) + " bytes (" +
                         std::string(to_string(static_cast<DType>(f[4]))) + ")";
      if (f[1] != f[2]) text += " in pieces of " + std::to_string(f[2]);
      if (takes_root(static_cast<Collective>(f[0]))) text += ", root " + std::to_string(f[5]);
      if (!f[6]) text += ", non-commutative operator";
      return text;
    };
    fail(ScheduleError("mismatched calls: rank " + std::to_string(rank) + " calls " + call(mine) +
                       ", but rank 0 calls " + call(zeros)));
  }
  if (zeros[8] < 0)
    throw UsageError(rank == 0 ? refusal
                               : "this " + std::string(to_string(c)) + " cannot be planned (rank 0 says why)");
  if (plan) return *plan;
  key.form = static_cast<Form>(zeros[7]);
  key.algorithm = algorithms()[static_cast<std::size_t>(zeros[8])].name;
  key.blocks = static_cast<int>(zeros[9]);
  key.runtime_default = false;
  return planner.plan(key);
}

void MpiRank::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  if (allreduce_direct(send, recv, count, op)) return;
  const std::size_t eb = op.element_bytes;
  bool warmup = false;
  const ArrivalKey* key = arrive(warmup);  // plan/arrival_monitor.hpp
  in_pieces(count, piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::allreduce, count, n, op.dtype, eb, &op, 0, warmup, key);
    // The user's receive buffer is the working vector, the input read from
    // send where it is not yet written (none in place).
    std::byte* y = bytes_of(recv) + at * eb;
    run(e.steps, y, op, Collective::allreduce, input_of(bytes_of(send) + at * eb, y, n));
  });
  returned(Collective::allreduce);
}

void MpiRank::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  if (reduce_direct(send, recv, count, op, root)) return;
  const std::size_t eb = op.element_bytes;
  in_pieces(count, piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::reduce, count, n, op.dtype, eb, &op, root);
    // The root works in its receive buffer, the others in private memory.
    std::byte* y = rank == root ? bytes_of(recv) + at * eb : work_vector(n * eb);
    run(e.steps, y, op, Collective::reduce, input_of(bytes_of(send) + at * eb, y, n, rank == root));
  });
  returned(Collective::reduce);
}

void MpiRank::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  const std::size_t eb = dtype_size(dtype);
  if (bcast_direct(buffer, count, eb, root)) return;
  const ReduceOp op = data_op(dtype, eb);
  in_pieces(count, piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::bcast, count, n, dtype, eb, nullptr, root);
    run(e.steps, bytes_of(buffer) + at * eb, op, Collective::bcast);
  });
  returned(Collective::bcast);
}

void MpiRank::barrier() {
  if (barrier_direct()) return;
  // One element of zero bytes: the schedule's messages carry no data.
  auto& e = entry(Collective::barrier, 1, 1, DType::uint8, 0, nullptr, 0);
  run(e.steps, work_vector(0), data_op(DType::uint8, 0), Collective::barrier);
  returned(Collective::barrier);
}

void MpiRank::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  const std::size_t eb = dtype_size(dtype);
  if (allgather_direct(send, recv, count, eb)) return;
  const ReduceOp op = data_op(dtype, eb);
  const auto p = static_cast<std::size_t>(team->ranks);
  const auto me = static_cast<std::size_t>(rank);
  // In place: the contribution is already at its block of recv.
  const std::byte* mine = send == recv ? bytes_of(recv) + me * count * eb : bytes_of(send);
  in_pieces(count, block_piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::allgather, count, n, dtype, eb, nullptr, 0);
    // Blocks sit in the schedule's order in the working vector: the user's
    // receive buffer when that is its order and the call runs in one piece.
    const bool into_recv = n == count && (team->contiguous || !e.over_internal);
    std::byte* y = into_recv ? bytes_of(recv) : work_vector(p * n * eb);
    copy_bytes(y + e.block_at(*team, rank, n), mine + at * eb, n * eb);
    run(e.steps, y, op, Collective::allgather);
    if (!into_recv)
      for (std::size_t v = 0; v < p; ++v)
        copy_bytes(bytes_of(recv) + (v * count + at) * eb, y + e.block_at(*team, static_cast<int>(v), n), n * eb);
  });
  returned(Collective::allgather);
}

void MpiRank::reduce_scatter_blocks(const std::byte* in, std::byte* out, const BlockCounts& b, const ReduceOp& op) {
  const std::size_t eb = op.element_bytes;
  const auto me = static_cast<std::size_t>(rank);
  in_pieces(b.block, block_piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::reduce_scatter, b.block, n, op.dtype, eb, &op, 0);
    std::byte* y = work_vector(b.counts.size() * n * eb);
    b.pack(in, y, at, n, eb, [&](int v) { return e.block_at(*team, v, n); });
    run(e.steps, y, op, Collective::reduce_scatter);
    // In place, this overwrites input only where this piece has read it.
    copy_bytes(out + at * eb, y + e.block_at(*team, rank, n), b.real(me, at, n) * eb);
  });
  returned(Collective::reduce_scatter);
}

// Pieces of every block, each through private working memory in the
// schedule's layout (MovedBlocks): the user's buffers hold the blocks in
// another, and only the root holds a scatter's or receives a gather's whole.
void MpiRank::move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) {
  const std::size_t eb = dtype_size(dtype);
  if (c == Collective::alltoall) root = 0;
  const ReduceOp op = data_op(dtype, eb);
  const MovedBlocks blocks{c, team->ranks, rank, root, count, eb};
  in_pieces(count, block_piece(eb, c == Collective::alltoall ? 2 : 1), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(c, count, n, dtype, eb, nullptr, root);
    std::byte* y = work_vector(blocks.vector(n) * eb);
    blocks.load(send, recv, y, at, n);
    run(e.steps, y, op, c);
    blocks.store(y, send, recv, at, n);
  });
  returned(c);
}

}  // namespace

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
  for (int t = 0; t < threads; ++t) {
    auto core = std::make_unique<MpiRank>(impl_.get(), impl_->first_rank + t);
    impl_->cores.push_back(core.get());
    impl_->comms.emplace_back(std::move(core));
  }
}

const Planner& Team::planner() const { return impl_->planner; }

std::shared_ptr<const CompiledPlan> Team::compiled_plan(const CallKey& key, int thread) const {
  impl_->check_thread(thread);
  return static_cast<const MpiRank*>(impl_->cores[static_cast<std::size_t>(thread)])->cached_plan(key);
}

}  // namespace copse::mpi
