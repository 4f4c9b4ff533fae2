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
// call's; the thread Comm's take the team's shared plan. Neither uses the
// direct shared-memory paths, which wait for every rank of the node.

#include <cstddef>
#include <memory>

#include "common/reduce_op.hpp"
#include "common/schedule.hpp"

namespace copse {

struct BlockCounts;  // runtime/rank_core.hpp

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
