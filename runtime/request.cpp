#include "runtime/request.hpp"

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include "common/error.hpp"
#include "runtime/communicator.hpp"
#include "runtime/pending.hpp"
#include "runtime/rank_core.hpp"

namespace copse {

Request::Request(RankCore* core, std::shared_ptr<PendingCall> call, bool persistent)
    : core_(core), call_(std::move(call)), persistent_(persistent) {}

Request& Request::operator=(Request other) noexcept {
  std::swap(core_, other.core_);
  std::swap(call_, other.call_);
  std::swap(persistent_, other.persistent_);
  return *this;  // the old call goes with `other`
}

Request::~Request() {
  // Requests are the rank's thread's: the count is only its copies.
  if (persistent_ && call_ && call_.use_count() == 1 && !done()) core_->adopt(std::move(call_));
}

bool Request::test() { return !call_ || core_->progress(call_.get(), false); }

void Request::wait() {
  if (call_) core_->progress(call_.get(), true);
}

bool Request::done() const { return !call_ || call_->state != PendingCall::State::queued; }

bool Request::waits_without_allocating() const { return !call_ || call_->waits_without_allocating(); }

void Request::start() {
  if (!persistent_) throw UsageError("start: not a persistent request");
  if (!done()) throw UsageError("start: the request's call is still running");
  call_->restart();
  core_->enqueue(*call_, nullptr);  // held by this Request (or, if it goes first, adopt())
}

// ---- RankCore's queue ----

void RankCore::enqueue(PendingCall& call, std::shared_ptr<PendingCall> owner) {
  call.state = PendingCall::State::queued;
  outstanding_.push_back({&call, std::move(owner)});
  progress(nullptr, false);  // posts what can be posted now; waits for nothing
}

void RankCore::adopt(std::shared_ptr<PendingCall> call) noexcept {
  for (std::size_t i = head_; i < outstanding_.size(); ++i)
    if (outstanding_[i].call == call.get()) {
      outstanding_[i].owner = std::move(call);
      return;
    }
}

bool RankCore::progress(const PendingCall* until, bool wait) {
  if (until && until->state != PendingCall::State::queued) return true;
  while (head_ < outstanding_.size()) {
    PendingCall& call = *outstanding_[head_].call;
    try {
      if (!call.progress(wait)) return false;
      call.state = PendingCall::State::done;
    } catch (...) {
      call.state = PendingCall::State::failed;
      pop_outstanding();
      throw;
    }
    const bool mine = &call == until;
    pop_outstanding();
    if (mine) return true;
  }
  return true;
}

void RankCore::pop_outstanding() noexcept {
  outstanding_[head_] = {};  // a nonblocking call's owner lets it go
  if (++head_ == outstanding_.size()) {
    outstanding_.clear();  // keeps its room: a persistent call's start allocates nothing
    head_ = 0;
  }
}

std::shared_ptr<PendingCall> RankCore::make_call(const CallArgs&, bool) {
  throw UsageError("nonblocking collectives: not served by this runtime");
}

}  // namespace copse

namespace copse {

namespace {

class DirectCall final : public PendingCall {
 public:
  DirectCall(RankCore& core, const SlotCall& call) : core_(core), call_(call) {}
  bool progress(bool wait) override { return core_.progress_direct(call_, posted_, number_, wait); }
  void restart() override { posted_ = false; }
  bool waits_without_allocating() const override { return true; }

 private:
  RankCore& core_;
  const SlotCall call_;
  bool posted_ = false;
  std::uint32_t number_ = 0;
};

}  // namespace

std::optional<SlotCall> RankCore::slot_call(const CallArgs& a) const {
  const Collective c = a.collective;
  if (a.vector || (c == Collective::allreduce && core_team.arrival_aware)) return std::nullopt;  // as the blocking call
  const int p = core_team.ranks;
  const auto me = static_cast<std::size_t>(rank);
  SlotCall s{c, bytes_of(a.send), bytes_of(a.recv), a.count, a.op ? a.op->element_bytes : dtype_size(a.dtype)};
  s.op = a.op;
  const std::size_t bytes = s.count * s.element_bytes;
  switch (c) {
    case Collective::barrier: s = SlotCall{c}; break;
    case Collective::allreduce: break;
    case Collective::reduce_scatter:
      s.total = a.blocks ? a.blocks->total() : static_cast<std::size_t>(p) * a.count;
      s.from = a.blocks ? a.blocks->displs[me] : me * a.count;
      s.count = a.blocks ? a.blocks->counts[me] : a.count;
      break;
    case Collective::allgather:  // in place: our block is at its place in recv
      if (a.send == a.recv) s.send += me * bytes;
      break;
    case Collective::alltoall: break;
    case Collective::reduce:
    case Collective::gather:
    case Collective::scatter:
    case Collective::bcast: {
      CallKey key;
      key.collective = c;
      key.root = s.root = a.root;
      check_call(key, nullptr);  // a root that is not a rank
      if (c == Collective::gather && a.send == a.recv && rank == a.root) s.send += me * bytes;  // in place likewise
      break;
    }
  }
  if (direct_fits(c, s.posts(p), false)) return s;
  // A broadcast beyond the slots: read where the root's buffer lies, where
  // the ranks may read each other's memory and reads beat copies (the
  // blocking broadcast's ring reads so too).
  if (c != Collective::bcast || !leaves_choice_to_direct(c) || !DirectReduce::serves(p)) return std::nullopt;
  const LinkConfig& link_config = core_team.engine->config();
  s.by_address = core_team.shares_memory || (link_config.cross_memory_attach && link_config.fast_attach);
  return s.by_address ? std::optional<SlotCall>(s) : std::nullopt;
}

std::shared_ptr<PendingCall> RankCore::direct_call(const CallArgs& a) {
  const std::optional<SlotCall> call = slot_call(a);
  return call ? std::make_shared<DirectCall>(*this, *call) : nullptr;
}

bool RankCore::progress_direct(const SlotCall& c, bool& posted, std::uint32_t& number, bool wait) {
  if (core_team.engine->aborted()) core_team.rethrow_failure();
  try {
    if (!posted) {
      link.round = calls;
      const std::optional<std::uint32_t> started = direct->start(c, wait);
      if (!started) return false;
      ++calls;
      number = *started;
      posted = true;
    }
    if (!direct->finish(number, c, wait)) return false;
  } catch (...) {
    core_team.rethrow_failure();
  }
  posted = false;
  last_time = 0;
  returned(c.collective);  // as run_direct ends a blocking one (no clock read: not arrival-aware)
  return true;
}

Request RankCore::start(const CallArgs& args, bool persistent) {
  std::shared_ptr<PendingCall> call = direct_call(args);
  if (!call) {
    call = make_call(args, persistent);
  } else if (persistent) {
    drain();
    reserve_for_persistent();
  }
  if (!persistent) enqueue(*call, call);  // the queue's own reference: its Request may go first
  return Request(this, std::move(call), persistent);
}

// ---- the Comm's nonblocking calls ----

void Comm::wait_outstanding() { core_->drain(); }
bool Comm::test_outstanding() { return core_->progress(nullptr, false); }

RankCore& Comm::ready() {
  core_->drain();
  return *core_;
}

Request Comm::iallreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  return core_->start({Collective::allreduce, send, recv, count, &op, op.dtype, 0}, false);
}
Request Comm::ireduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  return core_->start({Collective::reduce, send, recv, count, &op, op.dtype, root}, false);
}
Request Comm::ibcast(void* buffer, std::size_t count, DType dtype, int root) {
  return core_->start({Collective::bcast, buffer, buffer, count, nullptr, dtype, root}, false);
}
Request Comm::ibarrier() { return core_->start({Collective::barrier, nullptr, nullptr, 0, nullptr}, false); }
Request Comm::iallgather(const void* send, void* recv, std::size_t count, DType dtype) {
  return core_->start({Collective::allgather, send, recv, count, nullptr, dtype, 0}, false);
}
Request Comm::ireduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  return core_->start({Collective::reduce_scatter, send, recv, count, &op, op.dtype, 0}, false);
}
namespace {
// reduce_scatter's arguments with a count per rank.
CallArgs counted(const void* send, void* recv, const int* counts, const ReduceOp& op, int ranks) {
  CallArgs args{Collective::reduce_scatter, send, recv, 0, &op, op.dtype, 0};
  args.blocks = std::make_shared<const BlockCounts>(BlockCounts::of(counts, ranks));
  return args;
}
}  // namespace

Request Comm::ireduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  return core_->start(counted(send, recv, counts, op, core_->core_team.ranks), false);
}
Request Comm::reduce_scatter_init(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  return core_->start(counted(send, recv, counts, op, core_->core_team.ranks), true);
}
Request Comm::iscatter(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  return core_->start({Collective::scatter, send, recv, count, nullptr, dtype, root}, false);
}
Request Comm::igather(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  return core_->start({Collective::gather, send, recv, count, nullptr, dtype, root}, false);
}
Request Comm::ialltoall(const void* send, void* recv, std::size_t count, DType dtype) {
  return core_->start({Collective::alltoall, send, recv, count, nullptr, dtype, 0}, false);
}
Request Comm::allreduce_init(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  return core_->start({Collective::allreduce, send, recv, count, &op, op.dtype, 0}, true);
}
Request Comm::reduce_init(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  return core_->start({Collective::reduce, send, recv, count, &op, op.dtype, root}, true);
}
Request Comm::bcast_init(void* buffer, std::size_t count, DType dtype, int root) {
  return core_->start({Collective::bcast, buffer, buffer, count, nullptr, dtype, root}, true);
}
Request Comm::barrier_init() { return core_->start({Collective::barrier, nullptr, nullptr, 0, nullptr}, true); }
Request Comm::allgather_init(const void* send, void* recv, std::size_t count, DType dtype) {
  return core_->start({Collective::allgather, send, recv, count, nullptr, dtype, 0}, true);
}
Request Comm::reduce_scatter_block_init(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  return core_->start({Collective::reduce_scatter, send, recv, count, &op, op.dtype, 0}, true);
}
Request Comm::scatter_init(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  return core_->start({Collective::scatter, send, recv, count, nullptr, dtype, root}, true);
}
Request Comm::gather_init(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  return core_->start({Collective::gather, send, recv, count, nullptr, dtype, root}, true);
}
Request Comm::alltoall_init(const void* send, void* recv, std::size_t count, DType dtype) {
  return core_->start({Collective::alltoall, send, recv, count, nullptr, dtype, 0}, true);
}

}  // namespace copse
