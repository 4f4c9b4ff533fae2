// The MPI Comm's nonblocking and persistent calls (runtime/pending.hpp):
// the blocking collectives' pieces and buffers (runtime/mpi_comm.cpp), each
// piece's run progressed a step at a time.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "runtime/call_buffers.hpp"
#include "runtime/mpi_rank.hpp"
#include "runtime/pending.hpp"

namespace copse::mpi {

namespace {

// An MpiRank's call, piece by piece as the blocking one: each piece's plan
// from the cache (a persistent call's own copies), or agreed with rank 0 by
// a run of the agreement's schedule; then the piece's run. Every run is
// progressed without waiting unless asked to wait.
class MpiCall final : public PendingCall {
 public:
  MpiCall(MpiRank& rank, const CallArgs& args)
      : r_(rank), a_(args), b_(with_blocks(args, rank.team->ranks), rank.team->ranks, rank.rank) {
    const Collective c = a_.collective;
    const bool moves = MovedBlocks::moves(c);
    const bool blocks = c == Collective::allgather || c == Collective::reduce_scatter || moves;
    piece_ = blocks ? r_.block_piece(c, eb(), b_.count(), moves ? moved().areas() : 1) : r_.piece(c, eb(), b_.count());
  }
  bool progress(bool wait) override;
  void restart() override { stage_ = Stage::piece, at_ = 0; }
  // A persistent call's plans, now (waiting for the agreements), and room
  // for its working vector: its runs then plan and allocate nothing.
  void plan_now() {
    const std::uint64_t count = b_.count(), full = std::min(piece_, count), last = count % piece_;
    own_.push_back(r_.entry(a_.collective, count, full, a_.dtype, eb(), a_.op, a_.root));
    if (count > piece_ && last != 0)
      own_.push_back(r_.entry(a_.collective, count, last, a_.dtype, eb(), a_.op, a_.root));
    r_.work_vector(2 * static_cast<std::size_t>(r_.team->ranks) * full * eb());
  }

 private:
  enum class Stage : std::uint8_t { piece, agreeing, running };
  // reduce_scatter in blocks of the largest count (as MpiRank::reduce_scatter_blocks):
  // reduce_scatter_block's equal ones when the call gives none.
  static CallArgs with_blocks(CallArgs args, int ranks) {
    if (args.collective == Collective::reduce_scatter && !args.blocks)
      args.blocks = std::make_shared<const BlockCounts>(BlockCounts::uniform(ranks, args.count));
    return args;
  }
  std::size_t eb() const { return b_.element_bytes(); }
  // scatter, gather and alltoall: their blocks between the user's buffers and y (MpiRank::move's).
  MovedBlocks moved() const { return {a_.collective, r_.team->ranks, r_.rank, a_.root, b_.count(), eb()}; }
  const void* identity() const { return a_.op ? a_.op->identity.get() : nullptr; }
  // The working vector's block of rank v, when the piece's plan numbers the
  // ranks node by node and they are not consecutive there.
  std::span<const int> slot_of() const {
    const TeamState& t = *r_.team;
    return entry_->over_internal && !t.contiguous ? std::span<const int>(t.internal_of) : std::span<const int>();
  }
  MpiRank::Entry* find_entry();
  void begin_piece();

  MpiRank& r_;
  const CallChoice choice_ = r_.call_choice;  // as the call started (Comm::set_form, set_blocks)
  const CallArgs a_;
  const CallBuffers b_;  // the piece's buffers, as the thread Comm's calls (runtime/call_buffers.hpp)
  std::uint64_t piece_ = 1, at_ = 0, n_ = 0;
  Stage stage_ = Stage::piece;
  MpiRank::Entry* entry_ = nullptr;
  std::vector<MpiRank::Entry> own_;  // persistent: its pieces' plans (the full piece's, then the last's)
  CallKey key_;
  bool hierarchical_ = false;
  std::unique_ptr<MpiRank::Agreement> agreement_;
  StepRun run_;
  CallPiece running_;
};

MpiRank::Entry* MpiCall::find_entry() {
  if (!own_.empty()) return n_ == std::min(piece_, b_.count()) ? &own_.front() : &own_.back();
  key_ = r_.entry_key(a_.collective, n_, eb(), a_.op, a_.root, choice_, hierarchical_);
  if (auto* found = r_.cache.find(key_, a_.dtype, identity())) return &found->value;
  return nullptr;
}

bool MpiCall::progress(bool wait) {
  const Collective c = a_.collective;
  const std::uint64_t count = b_.count();
  for (;;) {
    switch (stage_) {
      case Stage::piece:
        n_ = std::min(piece_, count - at_);
        if ((entry_ = find_entry())) {
          begin_piece();
          stage_ = Stage::running;
        } else {
          if (r_.team->engine->aborted()) r_.team->rethrow_failure();
          r_.check_call(key_, a_.op);
          agreement_ = std::make_unique<MpiRank::Agreement>();
          r_.agree_begin(*agreement_, c, count, a_.dtype, r_.planner_of(hierarchical_),
                         r_.internal_key(key_, hierarchical_));
          r_.start_run(run_, r_.agree_steps, reinterpret_cast<std::byte*>(agreement_->got), r_.scratch.data(),
                       agreement_->record, c, &r_.mpi);
          stage_ = Stage::agreeing;
        }
        break;
      case Stage::agreeing: {
        if (!r_.advance_run(run_, &r_.mpi, wait)) return false;
        const Planner& planner = r_.planner_of(hierarchical_);
        CompiledPlan plan = r_.agree_end(*agreement_, c, planner, r_.internal_key(key_, hierarchical_));
        agreement_.reset();
        entry_ = &r_.cache
                      .insert({key_, a_.dtype, a_.op ? a_.op->identity : nullptr,
                               r_.make_entry(std::move(plan), hierarchical_, c, eb())})
                      .value;
        begin_piece();
        stage_ = Stage::running;
        break;
      }
      case Stage::running:
        if (!r_.advance_run(run_, &r_.mpi, wait)) return false;
        b_.store(running_, slot_of());
        stage_ = Stage::piece;
        at_ += n_;
        if (at_ >= count) {
          at_ = 0;
          r_.returned(c);
          return true;
        }
        break;
    }
  }
}

// The piece's working vector, its input loaded as the blocking call's
// (MpiRank::allreduce, ...), and its run started.
void MpiCall::begin_piece() {
  const std::span<const int> slots = slot_of();
  running_ = b_.load(at_, n_, r_.work_vector(b_.work_bytes(n_, slots)), slots);
  r_.start_run(run_, entry_->steps, running_.y, r_.scratch.data(), b_.op(), a_.collective, &r_.mpi, running_.input,
               entry_->attach_from);
}

// A v-variant (PaddedCall, runtime/pending.hpp): the largest count and
// every rank's refusal agreed by an allreduce (MAX of both), then -- unless
// the deferral gives the call to another -- its equal-block call over the
// padded buffers. Both are MpiCalls, progressed a step at a time as the
// others, inside this call's place in the queue: every rank decides in the
// same order.
class VectorCall final : public PendingCall {
 public:
  VectorCall(MpiRank& rank, const CallArgs& args)
      : r_(rank), deferral_(args.vector->deferral), max_(builtin_op("max", DType::uint64)) {
    if (!deferral_ || !deferral_->refused) padded_.emplace(args, rank.rank, rank.team->ranks);
    mine_[0] = padded_ ? padded_->mine() : 0;
    mine_[1] = padded_ ? 0 : 1;
    if (deferral_ || padded_->agrees())
      agreement_.emplace(r_, CallArgs{Collective::allreduce, mine_, most_, 2, &max_, DType::uint64, 0});
    else
      most_[0] = mine_[0];
  }
  bool progress(bool wait) override;
  void restart() override {
    stage_ = Stage::load;
    if (run_) run_->restart();
  }
  // A persistent call's agreement, now (waiting), its buffers and its run's plans.
  void plan_now() {
    if (agreement_) agreement_->progress(true);
    agreement_.reset();
    prepare();
    if (run_) run_->plan_now();
    stage_ = Stage::load;
  }

 private:
  enum class Stage : std::uint8_t { agree, load, run, other };
  void prepare() {
    const CallArgs a = padded_->prepare(most_[0]);
    if (a.count > 0) run_.emplace(r_, a);
  }

  MpiRank& r_;
  std::shared_ptr<VectorDeferral> deferral_;
  ReduceOp max_;
  std::optional<PaddedCall> padded_;  // none where this rank refused
  std::uint64_t mine_[2] = {0, 0}, most_[2] = {0, 0};
  std::optional<MpiCall> agreement_, run_;  // no run: every block is empty
  Stage stage_ = Stage::agree;
};

bool VectorCall::progress(bool wait) {
  for (;;) {
    switch (stage_) {
      case Stage::agree:
        if (agreement_ && !agreement_->progress(wait)) return false;
        if (deferral_ && !deferral_->runs_here(most_[0], most_[1] != 0)) {
          stage_ = Stage::other;
          break;
        }
        prepare();
        stage_ = Stage::load;
        break;
      case Stage::load:
        if (!run_) return true;
        padded_->load();
        stage_ = Stage::run;
        break;
      case Stage::run:
        if (!run_->progress(wait)) return false;
        padded_->store();
        stage_ = Stage::load;  // a persistent call's next start
        return true;
      case Stage::other: return deferral_->test(wait);
    }
  }
}

}  // namespace

std::shared_ptr<PendingCall> MpiRank::make_call(const CallArgs& args, bool persistent) {
  const Collective c = args.collective;
  if (takes_root(c) && (args.root < 0 || args.root >= team->ranks)) {
    CallKey key;
    key.collective = c;
    key.root = args.root;
    check_call(key, nullptr);  // the UsageError naming the root
  }
  if (args.vector) {
    auto call = std::make_shared<VectorCall>(*this, args);
    if (persistent) {
      if (args.vector->deferral) throw UsageError("a persistent v-variant is decided at its init, not deferred");
      drain();
      call->plan_now();
      reserve_for_persistent();
      link.unwritten.reserve(16);
    }
    return call;
  }
  auto call = std::make_shared<MpiCall>(*this, args);
  if (persistent) {
    drain();
    call->plan_now();
    reserve_for_persistent();
    link.unwritten.reserve(16);
  }
  return call;
}

}  // namespace copse::mpi
