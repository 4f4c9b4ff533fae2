#pragma once
// An MPI Team's thread rank (runtime/mpi_comm.hpp): the runtime core
// (runtime/rank_core.hpp) with its MPI link, its window, private working
// memory and its plans' agreement with rank 0. Private to the MPI runtime:
// runtime/mpi_comm.cpp (the blocking collectives, the Team) and
// runtime/mpi_pending.cpp (the nonblocking and persistent calls).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/step_executor.hpp"
#include "plan/hierarchical.hpp"
#include "plan/plan_cache.hpp"
#include "plan/planner.hpp"
#include "runtime/mpi_team_state.hpp"
#include "runtime/rank_core.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

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
// Where cross-memory attach serves allgathers alone (TeamState::AttachUse),
// the fewest bytes of a send it reads: smaller blocks still go through the
// windows, whose copies stay in the cache (np 4 on 2 cores, 64 KiB a rank,
// by median: Open MPI's time over copse's 0.90 with the read, 1.02 without).
constexpr std::size_t kAllgatherAttachFromBytes = std::size_t{256} << 10;

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
    std::uint64_t attach_from = 0;  // its runs' LinkRank::attach_from (MpiRank::attaches)
    // Where rank v's block of `n` elements sits in the window's vector.
    std::size_t block_at(const TeamState& t, int v, std::uint64_t n) const {
      const int at = over_internal ? t.internal(v) : v;
      return static_cast<std::size_t>(at) * static_cast<std::size_t>(n * element_bytes);
    }
  };

  TeamState* team;
  MpiLink mpi;
  std::byte* window;  // in the node's segment: this rank's stage (LinkConfig::staged_sends)
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

  void run(const Entry& e, std::byte* y, const ReduceOp& op, Collective c, RunInput input = {}) {
    RankCore::run(e.steps, y, scratch.data(), op, c, &mpi, input, e.attach_from);
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
    bool hierarchical = false;
    const CallKey key = entry_key(c, count, eb, op, root, call_choice, hierarchical, warmup, arrival);
    return cached(cache, key, dtype, op, [&] {
      const CallKey internal = internal_key(key, hierarchical);
      Agreement a;
      agree_begin(a, c, total, dtype, planner_of(hierarchical), internal);
      RankCore::run(agree_steps, reinterpret_cast<std::byte*>(a.got), scratch.data(), a.record, c, &mpi);
      return make_entry(agree_end(a, c, planner_of(hierarchical), internal), hierarchical, c, eb);
    });
  }
  // A piece's key in the cache; `hierarchical`: planned over the
  // node-by-node numbering (else the communicator's order).
  CallKey entry_key(Collective c, std::uint64_t count, std::size_t eb, const ReduceOp* op, int root,
                    const CallChoice& choice, bool& hierarchical, bool warmup = false,
                    const ArrivalKey* arrival = nullptr) const {
    const bool commutative = op ? op->commutative : true;
    const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
    // A non-commutative operator must see the communicator's rank order,
    // which the node-by-node numbering only keeps when nodes are consecutive;
    // a collective planned flat in every form (has_hierarchy) is planned
    // over that order too, so that its blocks need no renumbering.
    hierarchical = (team->contiguous || !reduces || commutative) && has_hierarchy(c);
    CallKey key = call_key(team->options, choice, c, count, eb, op, root, warmup);
    if (!hierarchical && has_hierarchy(c)) key.form = Form::flat;
    if (arrival && hierarchical) key.arrival = *arrival;
    return key;
  }
  const Planner& planner_of(bool hierarchical) const { return hierarchical ? team->planner : team->user_order; }
  CallKey internal_key(CallKey key, bool hierarchical) const {
    if (hierarchical) key.root = team->internal(key.root);
    return key;
  }
  Entry make_entry(CompiledPlan plan, bool hierarchical, Collective c, std::size_t eb) {
    Entry e{hierarchical, eb, std::make_shared<const CompiledPlan>(std::move(plan)), {}};
    const std::uint64_t elements = vector_elements(c, e.plan->shape);
    compile(e.plan->plan, hierarchical, elements, eb, e.steps);
    if (team->attach_use == TeamState::AttachUse::allgather && attaches(c, elements * eb))
      e.attach_from = kAllgatherAttachFromBytes;  // the link's own bound is kNeverAttach then
    return e;
  }

  // The agreement (agree_begin, a run of agree_steps on `got`, agree_end):
  // rank 0 plans the call and tells everyone what it chose, with its view of
  // the call; the others check the call and build that plan.
  struct Agreement {
    std::int64_t mine[kAgreeFields];
    std::int64_t got[kAgreeFields];  // rank 0's, after the run
    std::optional<CompiledPlan> plan;
    std::string refusal;
    ReduceOp record = data_op(DType::int64, sizeof(std::int64_t));
  };
  void agree_begin(Agreement& a, Collective c, std::uint64_t total, DType dtype, const Planner& planner,
                   const CallKey& key);
  CompiledPlan agree_end(Agreement& a, Collective c, const Planner& planner, CallKey key);

  // Whether the runs of collective `c` over a vector of `bytes` (all its
  // blocks) send by cross-memory attach (TeamState::AttachUse): an
  // allgather's where the team keeps it to those, when some node is
  // oversubscribed (every copy then takes a core from a peer) or the vector
  // would not fit one piece of the window.
  bool attaches(Collective c, std::uint64_t bytes) const {
    switch (team->attach_use) {
      case TeamState::AttachUse::none: return false;
      case TeamState::AttachUse::every: return true;
      case TeamState::AttachUse::allgather:
        return c == Collective::allgather && (team->oversubscribed || bytes > team->window_stride / 2);
    }
    return false;
  }
  // Pieces keep every vector within this: half a window, or kAttachedPieceBytes.
  std::size_t piece_bytes(bool attach) const { return attach ? kAttachedPieceBytes : team->window_stride / 2; }
  // Elements of `eb` bytes per piece of a call's vector of `count`, and per
  // block of a piece of p blocks of `count`
  std::uint64_t piece(Collective c, std::size_t eb, std::uint64_t count) const {
    const std::size_t most = piece_bytes(attaches(c, count * eb));
    if (eb > most)
      throw UsageError("an element of " + std::to_string(eb) + " bytes does not fit a piece of " +
                       std::to_string(most) + " bytes");
    return eb == 0 ? 1 : most / eb;
  }
  // (`areas` vectors of p blocks: alltoall's two).
  std::uint64_t block_piece(Collective c, std::size_t eb, std::uint64_t count, std::uint64_t areas = 1) const {
    const std::uint64_t blocks = areas * static_cast<std::uint64_t>(team->ranks);
    const std::uint64_t per = eb == 0 ? 1 : piece_bytes(attaches(c, count * eb * blocks)) / (eb * blocks);
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

  // A broadcast, allgather, reduce or reduce-scatter of `bytes` (`body`), where the team's
  // calls choose between reading and copying (runtime/read_choice.hpp): the
  // way set on the engine for it, its time taken, and at a trial's end the
  // team's agreement (agree_on_reads).
  template <typename Body>
  void choosing_read(Collective c, std::size_t bytes, Body&& body) {
    ReadChoice* choice = team->read_choice.get();
    if (!choice || !ReadChoice::chooses(c, bytes)) return body();
    team->engine->set_fast_attach(choice->reads(c, bytes));
    const auto start = std::chrono::steady_clock::now();
    body();
    if (choice->timed(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()))
      agree_on_reads(*choice);
  }
  void agree_on_reads(ReadChoice& choice);

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
    const auto p = static_cast<std::size_t>(team->ranks);
    choosing_read(Collective::reduce_scatter, p * count * op.element_bytes, [&] {
      if (reduce_scatter_block_direct(send, recv, count, op)) return;
      reduce_scatter_blocks(bytes_of(send == recv ? recv : send), bytes_of(recv),
                            BlockCounts::uniform(team->ranks, count), op);
    });
  }
  void reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) override {
    const BlockCounts blocks = BlockCounts::of(counts, team->ranks);
    choosing_read(Collective::reduce_scatter, blocks.total() * op.element_bytes, [&] {
      if (reduce_scatter_direct(send, recv, blocks, op)) return;
      reduce_scatter_blocks(bytes_of(send == recv ? recv : send), bytes_of(recv), blocks, op);
    });
  }
  void move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) override;
  std::shared_ptr<PendingCall> make_call(const CallArgs& args, bool persistent) override;  // mpi_pending below
};

}  // namespace copse::mpi
