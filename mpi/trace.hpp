#pragma once
// The trace file (mpi.trace, COPSE_MPI_TRACE=FILE): every process records each
// collective call the application makes -- served by copse or passed to the
// MPI library alike -- as one JSON line, for `copse replay` (tools/replay.hpp)
// to cost the same sequence of calls on another cluster and algorithm.
//
// One line per call and process (keys in this order, one line each):
//   {"rank": 0, "size": 4, "call": 7, "collective": "allreduce", "comm_size": 4, "comm_rank": 0,
//    "count": 1024, "type_size": 4, "op": "sum", "root": -1, "served": true,
//    "site": "trace_app+0x1a2b", "t": 0.012345678, "gap": 0.001234567, "duration": 0.000045678}
//   rank, size   the process in MPI_COMM_WORLD and its size
//   call         this process's call number, 0, 1, 2, ... over all its communicators
//   collective   allreduce, reduce, bcast, barrier, allgather, reduce_scatter_block, reduce_scatter,
//                scatter, gather, alltoall, allgatherv, gatherv, scatterv, alltoallv
//   comm_size, comm_rank  the communicator of the call and the process's rank in it
//   count        MPI's count argument: elements per process (allgather: recvcount, each process's
//                block; reduce_scatter_block: each block; reduce_scatter: the sum of recvcounts,
//                the whole input; scatter and alltoall: recvcount, gather: sendcount, one block,
//                the other side's at a root in place; allgatherv: the process's own recvcount,
//                gatherv: sendcount, scatterv: recvcount, alltoallv: the sum of sendcounts --
//                these differ between processes); 0 for barrier
//   type_size    bytes of one element of the datatype (MPI_Type_size; allgather: recvtype's;
//                scatter, gather, alltoall: that of the count's side)
//   op           sum, prod, min, max, band, bor, bxor, land, lor, maxloc, minloc, lxor, replace,
//                no_op, user, or "" for collectives without an operator
//   root         reduce, bcast, scatter and gather: the root in the communicator; -1 otherwise
//   served       copse served the call (false: passed to the MPI library)
//   site         where the application called from: the calling object file's name and the
//                return address's offset in it (`addr2line -e OBJECT OFFSET` names the line),
//                the same in every process and run of the same binary; "?" if unknown
//   t            when the call was entered, seconds after the common start
//   gap          seconds between the end of this process's previous call (or the common start)
//                and this call: the computation the application did in between
//   duration     seconds the call took in this process
// The common start is the end of a barrier over MPI_COMM_WORLD in MPI_Init,
// after which every process reads its clock. Rank 0 empties the file there, so
// a trace is one run's; the processes append their lines in chunks of whole
// lines (one write(2) each, O_APPEND), so lines never interleave, though
// different processes' chunks do: sort by (rank, call).

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>

#include "config/config.hpp"

namespace copse::mpi {

class Tracer {
 public:
  // Collective over MPI_COMM_WORLD (from MPI_Init): empties the file (rank 0),
  // then a barrier, then the common start.
  explicit Tracer(std::string path);
  ~Tracer();  // writes what is buffered; never throws
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  using Clock = std::chrono::steady_clock;
  struct Call {
    MpiCollective collective{};
    MPI_Comm comm = MPI_COMM_NULL;
    long long count = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;  // null: no datatype (barrier)
    MPI_Op op = MPI_OP_NULL;                // null: no operator
    int root = -1;
    void* site = nullptr;  // the application's return address
    Clock::time_point enter;
  };
  // One call, between `call.enter` and now.
  void record(const Call& call, bool served);
  // Writes the buffered lines to the file. Throws SystemError.
  void flush();

  // The first return address outside libcopse_mpi.so on this thread's stack.
  static void* caller();

 private:
  std::string line(const Call& call, bool served, Clock::time_point exit);

  std::string path_;
  int rank_ = 0, size_ = 1;
  Clock::time_point start_;
  std::mutex mutex_;  // calls from several threads
  Clock::time_point last_exit_;
  long long calls_ = 0;
  std::string buffer_;
};

// While a Scope lives, the calls made from it are traced (when tracing is on):
// it takes the enter time and site at construction, records at destruction,
// with `served` as the serving path marked it (mark_served()).
class TraceScope {
 public:
  TraceScope(Tracer* tracer, MpiCollective c, MPI_Comm comm, long long count, MPI_Datatype type, MPI_Op op, int root);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
  // The call is being served by copse (called on the serving path).
  static void mark_served() noexcept;

 private:
  Tracer* tracer_;
  Tracer::Call call_;
  bool outer_served_ = false;
};

// MPI_Reduce_scatter's whole input: the sum of the communicator's recvcounts
// (0 for a null array or communicator).
long long total_count(const int* counts, MPI_Comm comm);

}  // namespace copse::mpi
