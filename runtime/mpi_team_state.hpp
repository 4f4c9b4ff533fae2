#pragma once
// The MPI runtime's team (Team::Impl), private to libcopse_mpi: what
// runtime/mpi_comm.cpp (Comm and the collectives) shares with the set-up's files:
//   runtime/mpi_setup.cpp            options, processes, nodes, ranks, the hierarchy, the link engine
//   runtime/mpi_hierarchy_wire.hpp   each node's part of the hierarchy, sent as integers
//   runtime/mpi_segment.cpp          the node's shared-memory segment
//   runtime/mpi_cma_probe.cpp        whether cross-memory attach serves between the node's processes
//   runtime/mpi_failure.cpp          the node's first failure, and node peers that died
//   runtime/process_watch.hpp        whether the team's other processes are still there

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/error.hpp"
#include "common/rank_map.hpp"
#include "plan/planner.hpp"
#include "runtime/failure_record.hpp"
#include "runtime/mpi_comm.hpp"
#include "runtime/process_watch.hpp"
#include "runtime/rank_core.hpp"
#include "runtime/read_choice.hpp"
#include "topology/plan.hpp"
#include "transport/arena.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/link_engine.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

// How the pieces fit:
//  - Team: the private duplicate of the communicator (an MpiChannel), the
//    node's segment (a ShmArena holding the shared-memory link state, a
//    failure record and every rank's window), one LinkEngine over the node's
//    ranks, and the hierarchy. copse ranks are the communicator's order
//    (process by process, threads within); the hierarchy is planned over the
//    same ranks renumbered node by node ("internal" ranks), which is the
//    identity when nodes hold consecutive ranks.
//  - Comm: one per thread rank, over the runtime core (runtime/rank_core.hpp)
//    with an MpiRank (runtime/mpi_comm.cpp): its MpiLink (the executor's
//    remote link), its window (its stage in the segment: a send to a node
//    peer is copied there, and the peer pulls it straight into its own
//    memory) and its plan cache. A collective runs the schedule on the
//    user's buffers where their layout allows (else on private memory),
//    reading an allreduce's or reduce's input where it is not yet written
//    instead of copying it in first; vectors larger than half a window run
//    in pieces, so that every send fits the stage.
//  - Cross-memory attach (CommOptions::cross_memory_attach): where the set-up
//    probe finds every process able to read its node peers' memory, sends
//    to node peers of kAttachFromBytes and more skip the window: the peer
//    reads them straight out of the sender's buffer (process_vm_readv; the
//    link engine's LinkConfig::cross_memory_attach). Only the small sends
//    use the stage then, so pieces no longer follow the window; they stay
//    (of kAttachedPieceBytes) to keep MPI's int message counts and the
//    private working copies bounded.
//  - Schedules: hierarchical over internal ranks with peers renamed to copse
//    ranks, or -- a non-commutative operator on a communicator whose nodes
//    are not consecutive -- the inter-node algorithm itself over the copse
//    ranks in the communicator's order, every pair on the link the rank map
//    chooses.
//  - Agreement: a Comm that plans a new shape first runs a small broadcast
//    from rank 0 (a fixed binomial schedule) carrying rank 0's view of the
//    call and its block count; every rank plans with that count (so all
//    processes run the same schedule) and fails, naming both calls, if its
//    own call differs.
//  - Failure: the first error on a node is written to the segment's failure
//    record (so every rank of the node rethrows it) and sent to every other
//    process as a notice (so ranks of other nodes stop waiting too).
//  - Arrival estimates (Comm::edge, plan/arrival_monitor.hpp), with an
//    arrival-aware allreduce: the callers themselves publish, no monitoring
//    thread (which would need MPI_THREAD_MULTIPLE or a second lock holder
//    beside the ranks). A rank's one value per call (its predicted phase
//    length: from its previous collective's return to its arrival -- hosts'
//    clocks need not agree, the returns are close) goes to every other rank as
//    one 8-byte MPI_Isend on the private duplicate, under tags above the
//    links' (kArrivalTag + the thread pair); the allreduce posts the p - 1
//    receives and polls them (yielding, then sleeping 50 us between polls),
//    and plans from the same vector on every rank. Overhead per allreduce and
//    rank: p - 1 eight-byte sends and receives, O(p) (O(p^2) messages in the
//    job), mostly sent during the computation phase as Proficz §3 intends;
//    the eager sends complete at once. Plan entries per key are bounded as the
//    thread Comm's are, and since every rank looks up the same keys in the
//    same order, every rank's LRU cache hits and misses together.

using Clock = std::chrono::steady_clock;

// What the processes of a node share in their segment besides the link
// state: the node's first failure (kind and text), written once.
struct NodeShared {
  std::atomic<std::uint32_t> failure_claimed{0};
  std::atomic<std::uint32_t> failure_ready{0};
  std::int32_t failure_kind = 0;
  char failure_text[2048] = {};
};

// Where the creator put things (the segment's root).
struct SegmentRoot {
  Arena::Offset node = 0;
  Arena::Offset link = 0;
  Arena::Offset windows = 0;  // the node's i-th rank's window at windows + i * window_stride
  std::uint64_t window_stride = 0;
  Arena::Offset direct = 0;  // the direct reduce's slots (see TeamState::direct), if any
};

// Per process, as every process learns it in one allgather.
struct ProcessInfo {
  int threads = 1;
  int level = MPI_THREAD_SINGLE;
  int pid = 0;
  int pu = -1;
  int ok = 1;  // its options were valid
};

// One per Team (one per process and communicator): what set_up found and
// built, shared by the process's thread ranks (their Comms). The core's part
// (ranks, engine, direct reduce, the node-by-node numbering internal_of,
// arrival_aware) is CoreTeam's (runtime/rank_core.hpp).
struct TeamState : CoreTeam {
  CommOptions options;
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm node_comm = MPI_COMM_NULL;
  int process = 0;  // this process's MPI rank
  int threads = 1;
  int first_rank = 0;  // of this process's thread ranks
  int ranks_on_host = 0;
  RankMap layout;
  std::vector<int> user_of;  // node-by-node rank -> copse rank (internal_of: the other way)
  bool contiguous = true;    // nodes hold consecutive copse ranks (internal == copse)
  std::shared_ptr<const HierarchyPlan> plan;
  RankMap plan_nodes;  // the plan's node map (internal ranks), for autotuning
  std::unique_ptr<MpiChannel> channel;
  std::unique_ptr<ShmArena> arena;
  NodeShared* node = nullptr;
  std::vector<int> node_members;   // copse ranks of this node, ascending
  mutable ProcessWatches watches;  // the other processes: of this host by pidfd, one of another host by TCP
  std::vector<WatchCard> cards;    // per process: its host and watch listener
  std::vector<int> pid_of;         // per process
  std::byte* windows = nullptr;
  std::size_t window_stride = 0;
  // Cross-memory attach between the node's processes, as agreed at set-up
  // (probe_cross_memory_attach): for no collective; for every collective's
  // large sends; or, where the kernel's read was timed slower than 1.5
  // local copies, for an allgather's alone (MpiRank::attaches): each of its
  // ranks copies p - 1 blocks out of windows their writers copied them
  // into, every rank busy at once, and one read instead of two copies still
  // wins there -- np 4 on 2 cores, 1 MiB a rank, by median: 2.4 ms read,
  // 5.0 ms through the windows, Open MPI 2.5 ms; np 2, 4 MiB: 1.9 against
  // 3.0 ms -- while a broadcast's or a reduction's sender copies in parallel
  // with its receiver, and the read lost (np 2, 1 MiB: bcast 1.6 against 1.0
  // times Open MPI's time, reduce 1.25 against 0.7). A scatter's, gather's
  // and alltoall's reads, which replace copies made one after another,
  // stay. A one-node team's direct broadcast, allgather, reduce-scatter and reduce read too
  // only where the read beat the ring as well (reads_beat_ring).
  enum class AttachUse : std::uint8_t { none, allgather, every };
  AttachUse attach_use = AttachUse::none;
  // Where the read is slow (AttachUse::allgather, found by the probe), one
  // broadcast through the direct broadcast's ring against one by address,
  // timed at set-up by the node's readers (ring_against_read): on this
  // 2-core virtual machine the same binary's launches fall into two modes,
  // whichever the host gives them, and mostly keep it to the end (not
  // always: one launch of half a minute timed the ring 15.6 us against the
  // read's 33, then ran every copy slowly). In one the ring,
  // both processes copying at once through caches that hand lines over
  // quickly, beats the read 2.5 times (np 2, 256 KiB: 10 us against 25, and
  // mpi_collectives --sync p2p, tuned/copse by median, 16 KiB-4 MiB: bcast
  // 2.3-2.9 through the ring, 1.0-1.1 read; reduce 1.5-2.6 against
  // 0.9-1.0); in the other every copy through the segment takes 2-4 times
  // as long (Open MPI's own allreduce too) and the ring loses (bcast 512 KiB
  // 77 us against Open MPI's single read's 50). The read is the same in
  // both. Agreed: the ring unless every reader found the read faster by a
  // margin (mpi_cma_probe.cpp).
  bool reads_beat_ring = false;
  // And then, where each process has one thread rank, each kind of call
  // goes on choosing by its own times (runtime/read_choice.hpp;
  // MpiRank::choosing_read): null elsewhere.
  std::unique_ptr<ReadChoice> read_choice;
  std::string cma_note;         // Team::cross_memory_attach_note
  bool oversubscribed = false;  // some node holds more ranks than can run at once (agreed)
  std::vector<Comm> comms;
  std::vector<RankCore*> cores;  // per thread: comms' cores (runtime/mpi_comm.cpp's MpiRank)

  // The plans: over the node-by-node numbering with the hierarchy, and
  // (non-commutative operators on nodes of non-consecutive ranks) flat over
  // the communicator's order.
  Planner planner, user_order;

  int max_threads = 1;  // the most thread ranks of any process (the arrival tags)

  FailureRecord first_error;  // this process's, when it was the node's first

  TeamState() { settings = &options; }
  ~TeamState() override;
  void set_up(MPI_Comm comm, int thread_count);
  // set_up's steps, in order (runtime/mpi_setup.cpp).
  std::vector<ProcessInfo> gather_processes(int processes, int thread_count);
  std::vector<int> form_nodes(int processes, int thread_count);
  std::vector<std::vector<int>> number_ranks(const std::vector<ProcessInfo>& info, const std::vector<int>& leader_of,
                                             int processes);
  void assemble_hierarchy(const std::vector<ProcessInfo>& info, const std::vector<std::vector<int>>& members_of,
                          int processes, int leader);
  void open_segment();  // runtime/mpi_segment.cpp
  // Sets attach_use, reads_beat_ring, cma_note and oversubscribed (runtime/mpi_cma_probe.cpp);
  // `concurrent_ranks`: of this node, as its processes agreed.
  void probe_cross_memory_attach(int concurrent_ranks);
  // The median microseconds a node reader took to receive a broadcast of
  // kRingProbeBytes through the direct broadcast's ring and by address,
  // timed in turn over the node's windows, which it zeroes again;
  // {0, 0} where the node has one process or no window to time in.
  struct RingAgainstRead {
    double ring = 0, read = 0;
  };
  RingAgainstRead ring_against_read();
  // The failure record (runtime/mpi_failure.cpp): LinkConfig::peer_gone and on_failure, and the rethrow.
  // The watches of the team's other processes (start_watches, after the
  // processes are known) and a process's name in messages: MPI rank, pid and host.
  void start_watches();
  std::string process_name(int process) const;
  std::string peer_gone(int peer) const;
  void record_failure(std::exception_ptr e) noexcept;
  [[noreturn]] void rethrow_failure() override;
  // UsageError unless `thread` is one of this process's thread ranks.
  void check_thread(int thread) const {
    if (thread < 0 || thread >= threads)
      throw UsageError("thread " + std::to_string(thread) + " is not one of this process's " + std::to_string(threads) +
                       " thread ranks");
  }
  std::byte* window_of(int rank) const {
    const auto i = std::lower_bound(node_members.begin(), node_members.end(), rank) - node_members.begin();
    return windows + static_cast<std::size_t>(i) * window_stride;
  }
};

// Team's state is the set-up's.
struct Team::Impl : TeamState {};

}  // namespace copse::mpi
