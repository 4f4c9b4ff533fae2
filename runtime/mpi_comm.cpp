#include "runtime/mpi_comm.hpp"

#include <algorithm>
#include <array>
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
#include "runtime/mpi_rank.hpp"
#include "runtime/mpi_team_state.hpp"
#include "runtime/rank_core.hpp"
#include "runtime/team_wait.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

// How the pieces fit together: runtime/mpi_team_state.hpp. This file: a
// process's thread rank over the runtime core (runtime/rank_core.hpp) -- its
// plans' agreement, its arrival channel, its working memory and pieces --
// and the collectives' buffer strategies.

// Rank 0 plans `key` and tells everyone what it chose (form, algorithm,
// blocks), with its view of the call; the others check the call and
// build that plan (the planner is deterministic, and with form, algorithm
// and blocks given it neither selects nor tunes). A plan rank 0 cannot
// make fails the call on every rank alike (no rank is left waiting).
void MpiRank::agree_begin(Agreement& a, Collective c, std::uint64_t total, DType dtype, const Planner& planner,
                          const CallKey& key) {
  const std::int64_t mine[kAgreeFields] = {static_cast<std::int64_t>(c),
                                           static_cast<std::int64_t>(total),
                                           static_cast<std::int64_t>(key.count),
                                           static_cast<std::int64_t>(key.element_bytes),
                                           static_cast<std::int64_t>(dtype),
                                           key.root,
                                           key.commutative ? 1 : 0,
                                           0,
                                           -1,
                                           0};
  std::memcpy(a.mine, mine, sizeof mine);
  if (rank == 0) {
    try {
      a.plan = plan_in_call_form(key, [&](const CallKey& k) { return planner.plan(k); });
      a.mine[7] = static_cast<std::int64_t>(a.plan->form);
      a.mine[8] = a.plan->algorithm - algorithms().data();
      a.mine[9] = a.plan->shape.blocks;
    } catch (const UsageError& e) {
      a.refusal = e.what();
    }
  }
  std::memcpy(a.got, a.mine, sizeof a.mine);
}

CompiledPlan MpiRank::agree_end(Agreement& a, Collective c, const Planner& planner, CallKey key) {
  const std::int64_t* mine = a.mine;
  const std::int64_t* zeros = a.got;
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
    throw UsageError(rank == 0 ? a.refusal
                               : "this " + std::string(to_string(c)) + " cannot be planned (rank 0 says why)");
  if (a.plan) return std::move(*a.plan);
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
  in_pieces(count, piece(Collective::allreduce, eb, count), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::allreduce, count, n, op.dtype, eb, &op, 0, warmup, key);
    // The user's receive buffer is the working vector, the input read from
    // send where it is not yet written (none in place).
    std::byte* y = bytes_of(recv) + at * eb;
    run(e, y, op, Collective::allreduce, input_of(bytes_of(send) + at * eb, y, n));
  });
  returned(Collective::allreduce);
}

void MpiRank::agree_on_reads(ReadChoice& choice) {
  const std::array<double, 2> mine = choice.trial_times();
  std::array<double, 2> slowest{};
  check_mpi(PMPI_Allreduce(mine.data(), slowest.data(), 2, MPI_DOUBLE, MPI_MAX, team->dup),
            "MPI_Allreduce (read or copy)");
  choice.agree(slowest);
}

void MpiRank::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  const std::size_t eb = op.element_bytes;
  choosing_read(Collective::reduce, count * eb, [&] {
    if (reduce_direct(send, recv, count, op, root)) return;
    in_pieces(count, piece(Collective::reduce, eb, count), [&](std::uint64_t at, std::uint64_t n) {
      auto& e = entry(Collective::reduce, count, n, op.dtype, eb, &op, root);
      // The root works in its receive buffer, the others in private memory.
      std::byte* y = rank == root ? bytes_of(recv) + at * eb : work_vector(n * eb);
      run(e, y, op, Collective::reduce, input_of(bytes_of(send) + at * eb, y, n, rank == root));
    });
    returned(Collective::reduce);
  });
}

void MpiRank::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  const std::size_t eb = dtype_size(dtype);
  choosing_read(Collective::bcast, count * eb, [&] {
    if (bcast_direct(buffer, count, eb, root)) return;
    const ReduceOp op = data_op(dtype, eb);
    in_pieces(count, piece(Collective::bcast, eb, count), [&](std::uint64_t at, std::uint64_t n) {
      auto& e = entry(Collective::bcast, count, n, dtype, eb, nullptr, root);
      run(e, bytes_of(buffer) + at * eb, op, Collective::bcast);
    });
    returned(Collective::bcast);
  });
}

void MpiRank::barrier() {
  if (barrier_direct()) return;
  // One element of zero bytes: the schedule's messages carry no data.
  auto& e = entry(Collective::barrier, 1, 1, DType::uint8, 0, nullptr, 0);
  run(e, work_vector(0), data_op(DType::uint8, 0), Collective::barrier);
  returned(Collective::barrier);
}

void MpiRank::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  const std::size_t eb = dtype_size(dtype);
  choosing_read(Collective::allgather, count * eb, [&] {
    if (allgather_direct(send, recv, count, eb)) return;
    const ReduceOp op = data_op(dtype, eb);
    const auto p = static_cast<std::size_t>(team->ranks);
    const auto me = static_cast<std::size_t>(rank);
    // In place: the contribution is already at its block of recv.
    const std::byte* mine = send == recv ? bytes_of(recv) + me * count * eb : bytes_of(send);
    in_pieces(count, block_piece(Collective::allgather, eb, count), [&](std::uint64_t at, std::uint64_t n) {
      auto& e = entry(Collective::allgather, count, n, dtype, eb, nullptr, 0);
      // Blocks sit in the schedule's order in the working vector: the user's
      // receive buffer when that is its order and the call runs in one piece.
      const bool into_recv = n == count && (team->contiguous || !e.over_internal);
      std::byte* y = into_recv ? bytes_of(recv) : work_vector(p * n * eb);
      copy_bytes(y + e.block_at(*team, rank, n), mine + at * eb, n * eb);
      run(e, y, op, Collective::allgather);
      if (!into_recv)
        for (std::size_t v = 0; v < p; ++v)
          copy_bytes(bytes_of(recv) + (v * count + at) * eb, y + e.block_at(*team, static_cast<int>(v), n), n * eb);
    });
    returned(Collective::allgather);
  });
}

void MpiRank::reduce_scatter_blocks(const std::byte* in, std::byte* out, const BlockCounts& b, const ReduceOp& op) {
  const std::size_t eb = op.element_bytes;
  const auto me = static_cast<std::size_t>(rank);
  in_pieces(b.block, block_piece(Collective::reduce_scatter, eb, b.block), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::reduce_scatter, b.block, n, op.dtype, eb, &op, 0);
    std::byte* y = work_vector(b.counts.size() * n * eb);
    b.pack(in, y, at, n, eb, [&](int v) { return e.block_at(*team, v, n); });
    run(e, y, op, Collective::reduce_scatter);
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
  in_pieces(count, block_piece(c, eb, count, blocks.areas()), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(c, count, n, dtype, eb, nullptr, root);
    std::byte* y = work_vector(blocks.vector(n) * eb);
    blocks.load(send, recv, y, at, n);
    run(e, y, op, c);
    blocks.store(y, send, recv, at, n);
  });
  returned(c);
}

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

MPI_Comm Team::duplicate() const { return impl_->dup; }

std::shared_ptr<const CompiledPlan> Team::compiled_plan(const CallKey& key, int thread) const {
  impl_->check_thread(thread);
  return static_cast<const MpiRank*>(impl_->cores[static_cast<std::size_t>(thread)])->cached_plan(key);
}

}  // namespace copse::mpi
