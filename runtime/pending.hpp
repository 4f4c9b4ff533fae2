#pragma once
// Nonblocking and persistent collectives of one rank (issue 19): a call
// that starts without waiting for any other rank and is progressed a step at
// a time (StepExecutor::advance, exec/step_executor.hpp) from its Request
// (runtime/communicator.hpp). A rank's outstanding calls form a queue, run
// one at a time in the order they were started (MPI's rule, and what keeps
// every link's messages in program order); a blocking collective first
// completes the queue.
//
// A runtime makes its calls (RankCore::make_call): the MPI Comm's agree on a
// new plan with a run of the agreement's own schedule, progressed like the
// call's; the thread Comm's take the team's shared plan. Where a call of one
// node fits the direct reduce's slots, both take them instead
// (RankCore::direct_call): a post that waits for nobody, then the reads.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/reduce_op.hpp"
#include "common/schedule.hpp"

namespace copse {

struct BlockCounts;  // runtime/rank_core.hpp
struct VectorArgs;   // below

// A collective's arguments, as the Comm's blocking calls take them (`op`:
// the reduction operator, null for the collectives that only move data;
// `dtype` theirs; `root` where one is taken). For bcast, `recv` is the buffer.
struct CallArgs {
  Collective collective = Collective::allreduce;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;
  const ReduceOp* op = nullptr;
  DType dtype = DType::uint8;
  int root = 0;
  // reduce_scatter with a count per rank (MPI_Ireduce_scatter); null: every
  // block of `count` (reduce_scatter_block).
  std::shared_ptr<const BlockCounts> blocks{};
  // The v-variant of `collective` (allgather: allgatherv, gather: gatherv,
  // scatter: scatterv, alltoall: alltoallv); null: the equal-block one.
  std::shared_ptr<const VectorArgs> vector{};
};

// Who runs a nonblocking v-variant once its ranks agreed on the largest
// block: the runtime, or another -- the MPI interposer defers it to the MPI
// library where a process cannot hand its part to copse or the decision
// table says so, which it can only know from every process's part, so the
// agreement decides alike everywhere and in the queue's order.
class VectorDeferral {
 public:
  explicit VectorDeferral(bool refused_) : refused(refused_) {}
  virtual ~VectorDeferral() = default;
  // Every rank's largest count (the most any rank names) and whether some
  // rank refused: true when the runtime runs the call; false (always when
  // `any_refused`) once the other's call is started.
  virtual bool runs_here(std::uint64_t most, bool any_refused) = 0;
  // The other's call, started: true once it is done (with `wait`: waits).
  virtual bool test(bool wait) = 0;

  // This rank cannot give its part to the runtime (its counts are not read).
  const bool refused;
};

// A v-variant's counts and displacements, in elements, as Comm::allgatherv,
// gatherv, scatterv and alltoallv take them (null displacements: packed).
struct VectorArgs {
  const int* send_counts = nullptr;
  const int* send_displs = nullptr;
  const int* recv_counts = nullptr;
  const int* recv_displs = nullptr;
  std::size_t count = 0;                       // gatherv's elements sent, scatterv's received
  std::shared_ptr<VectorDeferral> deferral{};  // nonblocking only; null: the runtime runs it
};

// A v-variant as the runtime runs it: its equal-block collective over
// blocks padded to the largest count, in private memory
// (runtime/vector_collectives.cpp says why). The blocking call runs its
// parts in a row; a nonblocking or persistent one (runtime/mpi_pending.cpp)
// agrees, prepares once, then loads, runs and stores each time.
class PaddedCall {
 public:
  // UsageError for a negative count or displacement, or a root that gives
  // itself another count than it expects.
  PaddedCall(const CallArgs& args, int rank, int ranks);
  // The largest count this rank names, and whether every rank must learn
  // the largest of all first (gatherv's and scatterv's counts are the
  // root's, alltoallv's each rank's own; allgatherv's every rank's).
  std::uint64_t mine() const { return mine_; }
  bool agrees() const { return args_.collective != Collective::allgather; }
  // With the agreed largest count: the padded buffers sized and the
  // equal-block call's arguments over them (count 0: nothing to run). A
  // second prepare with the same count allocates nothing.
  CallArgs prepare(std::uint64_t most);
  void load();   // this rank's input into the padded buffers
  void store();  // its result out of them

  // Blocks as a call describes them: counts and displacements in elements,
  // and the stride of the padded layout (the largest count).
  struct Blocks {
    std::vector<std::uint64_t> counts, displs;
    std::uint64_t most = 0;
    Blocks() = default;
    Blocks(const char* call, const int* counts, const int* displs, int ranks);
    // Block v between the user's layout and the padded one.
    void to_padded(const void* user, std::byte* padded, std::size_t v, std::size_t eb) const;
    void from_padded(const std::byte* padded, void* user, std::size_t v, std::size_t eb) const;
  };

 private:
  CallArgs args_;
  int rank_ = 0, ranks_ = 1;
  std::size_t eb_ = 1;
  bool at_root_ = false, in_place_ = false;
  Blocks in_, out_;  // the user's send and receive blocks (where this rank has them)
  std::uint64_t mine_ = 0, most_ = 0;
  std::vector<std::byte> sent_, received_;
};

class PendingCall {
 public:
  virtual ~PendingCall() = default;
  // Goes as far as it can without waiting for another rank (with `wait`:
  // to the end); true once the call is done. Throws the team's failure. Only
  // the queue's head is progressed.
  virtual bool progress(bool wait) = 0;
  // A persistent call, done or never started: the next progress() runs it
  // again from its start with the same arguments, planning nothing and
  // allocating nothing.
  virtual void restart() = 0;
  // Whether progress(true) waits as the blocking call's own wait does and
  // allocates nothing -- short of a wait long enough to be reported
  // (wait_report, a minute by default) -- as the direct calls, whose wait
  // policy is made once; a schedule's waits make their policy when they
  // block.
  virtual bool waits_without_allocating() const { return false; }

  enum class State : unsigned char { idle, queued, done, failed };
  State state = State::idle;
};

}  // namespace copse
