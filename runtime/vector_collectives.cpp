// The v-variants of Comm (runtime/communicator.hpp; issue 19): allgatherv,
// gatherv, scatterv and alltoallv, blocking, nonblocking and persistent, for
// the thread Comm and the MPI Comm alike since both are this one class.
// A blocking one on one node whose ranks may read each other's memory
// (threads; processes with cross-memory attach) reads its blocks where they
// lie (transport/direct_vector.hpp: no padding, no agreement, one copy).
// Elsewhere each runs as its equal-block collective over blocks padded to the largest
// count, in private memory (PaddedCall, runtime/pending.hpp): the plan
// caches, the agreement with rank 0, the MPI Comm's pieces and windows and
// the hierarchy's numbering are then those of the equal-block collectives,
// which are proven and tuned. The price is the padding's bytes -- nothing
// when the counts are equal, up to p times the data when one rank has
// everything -- and two copies. Serving them by the schedules with per-rank
// counts (algorithms/block_layout.hpp) needs plans keyed by the counts; that
// is left. MPI gives gatherv's and scatterv's counts to the root only and
// alltoallv's to each rank for its own blocks, so those three first agree on
// the largest count in one allreduce (MAX), which every rank must learn the
// same; allgatherv's counts are every rank's.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "runtime/communicator.hpp"
#include "runtime/pending.hpp"
#include "runtime/rank_core.hpp"

namespace copse {

namespace {

void copy(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}

// The largest of every rank's `mine`.
std::uint64_t agreed_most(Comm& comm, std::uint64_t mine) {
  std::uint64_t most = 0;
  comm.allreduce(&mine, &most, 1, builtin_op("max", DType::uint64));
  return most;
}

CallArgs vector_call(Collective c, const void* send, void* recv, DType dtype, int root, VectorArgs v) {
  CallArgs args{c, send, recv, 0, nullptr, dtype, root};
  args.vector = std::make_shared<const VectorArgs>(std::move(v));
  return args;
}

// A blocking v-variant: by address on one node where the ranks may read
// each other's memory (RankCore::vector_direct), else its parts in a row.
void run_vector(Comm& comm, RankCore& core, const CallArgs& args) {
  if (core.vector_direct(args)) return;
  PaddedCall call(args, comm.rank(), comm.size());
  const CallArgs a = call.prepare(call.agrees() ? agreed_most(comm, call.mine()) : call.mine());
  if (a.count == 0) return;
  call.load();
  switch (a.collective) {
    case Collective::allgather: comm.allgather(a.send, a.recv, a.count, a.dtype); break;
    case Collective::gather: comm.gather(a.send, a.recv, a.count, a.dtype, a.root); break;
    case Collective::scatter: comm.scatter(a.send, a.recv, a.count, a.dtype, a.root); break;
    default: comm.alltoall(a.send, a.recv, a.count, a.dtype); break;
  }
  call.store();
}

}  // namespace

PaddedCall::Blocks::Blocks(const char* call, const int* counts_, const int* displs_, int ranks) {
  if (!counts_) throw UsageError(std::string(call) + ": counts is null");
  std::uint64_t at = 0;
  for (int v = 0; v < ranks; ++v) {
    if (counts_[v] < 0) throw UsageError(std::string(call) + ": rank " + std::to_string(v) + "'s count is negative");
    if (displs_ && displs_[v] < 0)
      throw UsageError(std::string(call) + ": rank " + std::to_string(v) + "'s displacement is negative");
    counts.push_back(static_cast<std::uint64_t>(counts_[v]));
    displs.push_back(displs_ ? static_cast<std::uint64_t>(displs_[v]) : at);
    at += counts.back();
    most = std::max(most, counts.back());
  }
}

void PaddedCall::Blocks::to_padded(const void* user, std::byte* padded, std::size_t v, std::size_t eb) const {
  copy(padded + v * most * eb, static_cast<const std::byte*>(user) + displs[v] * eb, counts[v] * eb);
}

void PaddedCall::Blocks::from_padded(const std::byte* padded, void* user, std::size_t v, std::size_t eb) const {
  copy(static_cast<std::byte*>(user) + displs[v] * eb, padded + v * most * eb, counts[v] * eb);
}

PaddedCall::PaddedCall(const CallArgs& args, int rank, int ranks)
    : args_(args), rank_(rank), ranks_(ranks), eb_(dtype_size(args.dtype)) {
  const VectorArgs& v = *args.vector;
  const auto me = static_cast<std::size_t>(rank);
  in_place_ = args.send == args.recv;
  at_root_ = rank == args.root;
  switch (args.collective) {
    case Collective::allgather:
      out_ = Blocks("allgatherv", v.recv_counts, v.recv_displs, ranks);
      mine_ = out_.most;
      break;
    case Collective::gather:
      if (at_root_) out_ = Blocks("gatherv", v.recv_counts, v.recv_displs, ranks);
      if (at_root_ && !in_place_ && v.count != out_.counts[me])
        throw UsageError("gatherv: the root sends " + std::to_string(v.count) + " elements to itself but expects " +
                         std::to_string(out_.counts[me]));
      mine_ = at_root_ ? out_.most : v.count;
      break;
    case Collective::scatter:
      if (at_root_) in_ = Blocks("scatterv", v.send_counts, v.send_displs, ranks);
      mine_ = at_root_ ? in_.most : v.count;
      break;
    default:  // alltoall; in place, the blocks to send are recv's, by the receive counts
      in_ = in_place_ ? Blocks("alltoallv", v.recv_counts, v.recv_displs, ranks)
                      : Blocks("alltoallv", v.send_counts, v.send_displs, ranks);
      out_ = Blocks("alltoallv", v.recv_counts, v.recv_displs, ranks);
      mine_ = std::max(in_.most, out_.most);
      break;
  }
}

CallArgs PaddedCall::prepare(std::uint64_t most) {
  most_ = in_.most = out_.most = most;
  const std::size_t block = most * eb_, p = static_cast<std::size_t>(ranks_);
  CallArgs a{args_.collective, nullptr, nullptr, most, nullptr, args_.dtype, args_.root};
  if (most == 0) return a;
  const bool rooted = args_.collective == Collective::gather || args_.collective == Collective::scatter;
  sent_.resize((rooted && !at_root_ ? 1 : p) * block);
  a.send = a.recv = sent_.data();  // in place: this rank's block is in it
  if (args_.collective == Collective::gather && !at_root_) a.recv = nullptr;
  if (args_.collective == Collective::alltoall) {
    received_.resize(p * block);
    a.recv = received_.data();
  }
  return a;
}

void PaddedCall::load() {
  const std::size_t p = static_cast<std::size_t>(ranks_), me = static_cast<std::size_t>(rank_);
  const VectorArgs& v = *args_.vector;
  switch (args_.collective) {
    case Collective::allgather:
      if (in_place_)
        out_.to_padded(args_.recv, sent_.data(), me, eb_);
      else
        copy(sent_.data() + me * most_ * eb_, args_.send, out_.counts[me] * eb_);
      break;
    case Collective::gather: {
      std::byte* mine = sent_.data() + (at_root_ ? me * most_ * eb_ : 0);
      if (at_root_ && in_place_)
        copy(mine, static_cast<const std::byte*>(args_.recv) + out_.displs[me] * eb_, out_.counts[me] * eb_);
      else
        copy(mine, args_.send, v.count * eb_);
      break;
    }
    case Collective::scatter:
      for (std::size_t r = 0; at_root_ && r < p; ++r) in_.to_padded(args_.send, sent_.data(), r, eb_);
      break;
    default:  // before recv is written: in place, what is sent is there
      for (std::size_t r = 0; r < p; ++r) in_.to_padded(args_.send, sent_.data(), r, eb_);
      break;
  }
}

void PaddedCall::store() {
  const std::size_t p = static_cast<std::size_t>(ranks_), me = static_cast<std::size_t>(rank_);
  if (args_.collective == Collective::gather && !at_root_) return;  // elsewhere recv is insignificant
  switch (args_.collective) {
    case Collective::allgather:
    case Collective::gather:
      for (std::size_t r = 0; r < p; ++r)
        if (r != me || !in_place_) out_.from_padded(sent_.data(), args_.recv, r, eb_);
      break;
    case Collective::scatter:
      if (at_root_ && in_place_) return;  // in place: the root's block stays in send
      copy(args_.recv, sent_.data() + (at_root_ ? me * most_ * eb_ : 0),
           (at_root_ ? in_.counts[me] : args_.vector->count) * eb_);
      break;
    default:
      for (std::size_t r = 0; r < p; ++r) out_.from_padded(received_.data(), args_.recv, r, eb_);
      break;
  }
}

void Comm::allgatherv(const void* send, void* recv, const int* counts, const int* displs, DType dtype) {
  run_vector(*this, ready(),
             vector_call(Collective::allgather, send, recv, dtype, 0, {nullptr, nullptr, counts, displs}));
}

void Comm::gatherv(const void* send, std::size_t count, void* recv, const int* counts, const int* displs, DType dtype,
                   int root) {
  run_vector(*this, ready(),
             vector_call(Collective::gather, send, recv, dtype, root, {nullptr, nullptr, counts, displs, count}));
}

void Comm::scatterv(const void* send, const int* counts, const int* displs, void* recv, std::size_t count, DType dtype,
                    int root) {
  run_vector(*this, ready(),
             vector_call(Collective::scatter, send, recv, dtype, root, {counts, displs, nullptr, nullptr, count}));
}

void Comm::alltoallv(const void* send, const int* send_counts, const int* send_displs, void* recv,
                     const int* recv_counts, const int* recv_displs, DType dtype) {
  run_vector(
      *this, ready(),
      vector_call(Collective::alltoall, send, recv, dtype, 0, {send_counts, send_displs, recv_counts, recv_displs}));
}

// ---- nonblocking and persistent (runtime/pending.hpp): the MPI Comm's ----

Request Comm::iallgatherv(const void* send, void* recv, const int* counts, const int* displs, DType dtype,
                          std::shared_ptr<VectorDeferral> deferral) {
  return core_->start(vector_call(Collective::allgather, send, recv, dtype, 0,
                                  {nullptr, nullptr, counts, displs, 0, std::move(deferral)}),
                      false);
}
Request Comm::igatherv(const void* send, std::size_t count, void* recv, const int* counts, const int* displs,
                       DType dtype, int root, std::shared_ptr<VectorDeferral> deferral) {
  return core_->start(vector_call(Collective::gather, send, recv, dtype, root,
                                  {nullptr, nullptr, counts, displs, count, std::move(deferral)}),
                      false);
}
Request Comm::iscatterv(const void* send, const int* counts, const int* displs, void* recv, std::size_t count,
                        DType dtype, int root, std::shared_ptr<VectorDeferral> deferral) {
  return core_->start(vector_call(Collective::scatter, send, recv, dtype, root,
                                  {counts, displs, nullptr, nullptr, count, std::move(deferral)}),
                      false);
}
Request Comm::ialltoallv(const void* send, const int* send_counts, const int* send_displs, void* recv,
                         const int* recv_counts, const int* recv_displs, DType dtype,
                         std::shared_ptr<VectorDeferral> deferral) {
  return core_->start(vector_call(Collective::alltoall, send, recv, dtype, 0,
                                  {send_counts, send_displs, recv_counts, recv_displs, 0, std::move(deferral)}),
                      false);
}
Request Comm::allgatherv_init(const void* send, void* recv, const int* counts, const int* displs, DType dtype) {
  return core_->start(vector_call(Collective::allgather, send, recv, dtype, 0, {nullptr, nullptr, counts, displs}),
                      true);
}
Request Comm::gatherv_init(const void* send, std::size_t count, void* recv, const int* counts, const int* displs,
                           DType dtype, int root) {
  return core_->start(
      vector_call(Collective::gather, send, recv, dtype, root, {nullptr, nullptr, counts, displs, count}), true);
}
Request Comm::scatterv_init(const void* send, const int* counts, const int* displs, void* recv, std::size_t count,
                            DType dtype, int root) {
  return core_->start(
      vector_call(Collective::scatter, send, recv, dtype, root, {counts, displs, nullptr, nullptr, count}), true);
}
Request Comm::alltoallv_init(const void* send, const int* send_counts, const int* send_displs, void* recv,
                             const int* recv_counts, const int* recv_displs, DType dtype) {
  return core_->start(
      vector_call(Collective::alltoall, send, recv, dtype, 0, {send_counts, send_displs, recv_counts, recv_displs}),
      true);
}

}  // namespace copse
