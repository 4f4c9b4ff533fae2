#include "node/mpi_comm.hpp"

#include <hwloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/text.hpp"
#include "internode/mpi_link.hpp"
#include "internode/registry.hpp"
#include "internode/simulator.hpp"
#include "intranode/arena.hpp"
#include "intranode/direct_reduce.hpp"
#include "intranode/link_engine.hpp"
#include "intranode/step_executor.hpp"
#include "node/hierarchical.hpp"
#include "node/plan_cache.hpp"
#include "node/planner.hpp"
#include "node/team_direct.hpp"
#include "node/team_wait.hpp"

namespace copse::mpi {

// How the pieces fit:
//  - Team: the private duplicate of the communicator (an MpiChannel), the
//    node's segment (a ShmArena holding the shared-memory link state, a
//    failure record and every rank's window), one LinkEngine over the node's
//    ranks, and the hierarchy. copse ranks are the communicator's order
//    (process by process, threads within); the hierarchy is planned over the
//    same ranks renumbered node by node ("internal" ranks), which is the
//    identity when nodes hold consecutive ranks.
//  - Comm: one per thread rank, with its MpiLink (the executor's remote
//    link), its window (its stage in the segment: a send to a node peer is
//    copied there, and the peer pulls it straight into its own memory) and
//    its plan cache. A collective runs the schedule on the user's buffers
//    where their layout allows (else on private memory); vectors larger than
//    half a window run in pieces, so that every send fits the stage.
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
//  - Arrival estimates (Comm::edge, node/arrival_monitor.hpp), with an
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

namespace {

// The agreement record, in int64: the call as rank 0 sees it (collective,
// count, piece, element bytes, datatype, root, commutative) and what rank 0
// planned for it (form, algorithm's registry index or -1 if it could not
// plan, blocks).
constexpr int kAgreeFields = 10;
constexpr int kCallFields = 7;

// Cross-memory attach: sends to node peers of at least this many bytes are
// read by the receiver out of the sender's buffer, smaller ones go through
// the sender's stage (one system call costs about as much as copying a few
// KiB twice; see the link engine's LinkConfig::attach_from_bytes).
constexpr std::size_t kAttachFromBytes = std::size_t{16} << 10;
// With cross-memory attach, the most bytes of one piece of a collective's
// vector (allgather and reduce_scatter: of all blocks of a piece): far below
// MPI's int counts for messages between nodes, and the private working
// copies (reduce's non-roots, allgather and reduce_scatter) stay this small.
constexpr std::size_t kAttachedPieceBytes = std::size_t{256} << 20;
// The probe's word: what a reader expects to find in its peer's memory,
// mixed with the peer's pid.
constexpr std::uint64_t kProbeWord = 0x636f7073652d636dULL;
// The probe's timed read (CommOptions::Attach::automatic).
constexpr std::size_t kProbeSampleBytes = std::size_t{1} << 20;

using Clock = std::chrono::steady_clock;

// ---- small helpers -------------------------------------------------------------

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
}

[[noreturn]] void throw_as(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::usage: throw UsageError(message);
    case ErrorKind::schedule: throw ScheduleError(message);
    case ErrorKind::timeout: throw TimeoutError(message);
    case ErrorKind::aborted: throw LinkAborted();
    case ErrorKind::failed: throw RunFailure(message);
    case ErrorKind::system: throw SystemError(message);
  }
  throw RunFailure(message);
}

std::pair<ErrorKind, std::string> describe_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return {x.kind(), x.what()};
  } catch (const std::exception& x) {
    return {ErrorKind::failed, x.what()};
  } catch (...) {
    return {ErrorKind::failed, "unknown exception"};
  }
}

// Every process learns whether all set-up steps so far succeeded everywhere;
// a process that failed rethrows its own error, the others say that another
// failed (its own message is on its stderr or in its exception).
void agree(MPI_Comm comm, std::exception_ptr local) {
  int ok = local ? 0 : 1, all = 0;
  check_mpi(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce (copse set-up)");
  if (local) std::rethrow_exception(local);
  if (!all) throw SystemError("another process of the communicator failed to set up copse (its error says why)");
}

// This process's binding as the logical index of a PU, when it is bound
// within one core (then the core's first PU); -1 when unbound or bound more
// widely (the planner then distributes the node's ranks by block).
int bound_pu() {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) return -1;
  int pu = -1;
  if (hwloc_topology_load(topology) == 0) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set && hwloc_get_cpubind(topology, set, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(set)) {
      const hwloc_obj_t core = hwloc_get_obj_covering_cpuset(topology, set);
      if (core && (core->type == HWLOC_OBJ_CORE || core->type == HWLOC_OBJ_PU)) {
        const hwloc_obj_t first = hwloc_get_obj_inside_cpuset_by_type(topology, core->cpuset, HWLOC_OBJ_PU, 0);
        if (first) pu = static_cast<int>(first->logical_index);
      }
    }
    if (set) hwloc_bitmap_free(set);
  }
  hwloc_topology_destroy(topology);
  return pu;
}

// Whether a process of this host is still there: a pidfd (readable once the
// process has ended, zombie or not, and never confused by a reused pid), or
// kill(pid, 0) where pidfds are missing.
class ProcessWatch {
 public:
  explicit ProcessWatch(pid_t pid) : pid_(pid) {
#ifdef SYS_pidfd_open
    fd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
  }
  ~ProcessWatch() {
    if (fd_ >= 0) close(fd_);
  }
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  pid_t pid() const { return pid_; }
  bool gone() const {
    if (fd_ >= 0) {
      pollfd p{fd_, POLLIN, 0};
      return poll(&p, 1, 0) > 0;
    }
    return kill(pid_, 0) != 0 && errno == ESRCH;
  }

 private:
  pid_t pid_;
  int fd_ = -1;
};

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

// ---- the hierarchy, planned per node and assembled ------------------------------
//
// Every process must plan the same schedules, so every node's part of the
// hierarchy is planned once, by the node's leader on its own machine, and
// sent to everyone as integers: [ok=1, levels, per level: groups, per group:
// members, members..., offnode count, offnode..., pu_of..., level names,
// machine] with strings as a length and their characters; or [ok=0,
// message].

void put_string(std::vector<int>& out, const std::string& text) {
  out.push_back(static_cast<int>(text.size()));
  for (char ch : text) out.push_back(static_cast<unsigned char>(ch));
}

std::string get_string(const int*& in) {
  const int n = *in++;
  std::string text;
  for (int i = 0; i < n; ++i) text.push_back(static_cast<char>(*in++));
  return text;
}

std::vector<int> serialise_node_plan(const HierarchyPlan& plan) {
  std::vector<int> out{1, static_cast<int>(plan.levels[0].size())};
  for (const auto& level : plan.levels[0]) {
    out.push_back(static_cast<int>(level.size()));
    for (const Group& g : level) {
      out.push_back(static_cast<int>(g.members.size()));
      out.insert(out.end(), g.members.begin(), g.members.end());
    }
  }
  out.push_back(static_cast<int>(plan.offnode.size()));
  out.insert(out.end(), plan.offnode.begin(), plan.offnode.end());
  out.insert(out.end(), plan.pu_of.begin(), plan.pu_of.end());
  put_string(out, plan.level_names[0]);
  put_string(out, plan.machine[0]);
  return out;
}

// Appends node `node` (its ranks from `first` on, `ranks` of them) to `plan`.
void append_node_plan(HierarchyPlan& plan, int node, int first, int ranks, const int* in) {
  if (*in++ != 1) throw_as(ErrorKind::usage, get_string(in));
  auto& levels = plan.levels.emplace_back();
  const int level_count = *in++;
  for (int l = 0; l < level_count; ++l) {
    auto& groups = levels.emplace_back();
    const int group_count = *in++;
    for (int g = 0; g < group_count; ++g) {
      Group group{node, l, {}};
      const int members = *in++;
      for (int m = 0; m < members; ++m) group.members.push_back(first + *in++);
      groups.push_back(std::move(group));
    }
  }
  const int offnode = *in++;
  for (int i = 0; i < offnode; ++i) plan.offnode.push_back(first + *in++);
  for (int i = 0; i < ranks; ++i) {
    plan.pu_of.push_back(*in++);
    plan.node_of.push_back(node);
  }
  plan.first_rank.push_back(first);
  plan.level_names.push_back(get_string(in));
  plan.machine.push_back(get_string(in));
}

// The leader's view of its node: its machine, its ranks bound as the
// processes are (all bound within a core), else by block distribution.
std::vector<int> plan_own_node(const CommOptions& options, const std::vector<int>& pus) {
  try {
    NodeSpec spec{Machine::detect(), static_cast<int>(pus.size()), {}};
    const bool bound = std::all_of(pus.begin(), pus.end(), [&](int pu) { return pu >= 0 && pu < spec.machine.pus(); });
    if (bound) {
      spec.binding = pus;
      try {
        return serialise_node_plan(plan_hierarchy({spec}, options.grouping, options.multi_leader));
      } catch (const UsageError&) {
        // Bound in an order that would make a group non-contiguous: plan as
        // if unbound rather than refuse (the groups then follow rank order).
        spec.binding.clear();
      }
    }
    return serialise_node_plan(plan_hierarchy({spec}, options.grouping, options.multi_leader));
  } catch (const std::exception& e) {
    std::vector<int> out{0};
    put_string(out, e.what());
    return out;
  }
}

}  // namespace

// ---- the team (Team::Impl) ---------------------------------------------------------------------

struct TeamState {
  CommOptions options;
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm node_comm = MPI_COMM_NULL;
  int process = 0;  // this process's MPI rank
  int threads = 1;
  int first_rank = 0;  // of this process's thread ranks
  int ranks = 0;
  int ranks_on_host = 0;
  RankMap layout;
  std::vector<int> internal_of, user_of;  // copse rank <-> node-by-node rank
  bool contiguous = true;                 // nodes hold consecutive copse ranks (internal == copse)
  std::shared_ptr<const HierarchyPlan> plan;
  RankMap plan_nodes;  // the plan's node map (internal ranks), for autotuning
  std::unique_ptr<MpiChannel> channel;
  std::unique_ptr<ShmArena> arena;
  NodeShared* node = nullptr;
  std::vector<int> node_members;                         // copse ranks of this node, ascending
  std::map<int, std::unique_ptr<ProcessWatch>> watches;  // other processes of this node
  std::vector<int> pid_of;                               // per process
  std::unique_ptr<LinkEngine> engine;
  // A communicator on one node: small allreduces and barriers in one round
  // through slots in the segment (intranode/direct_reduce.hpp), as the
  // thread Team does; null otherwise.
  std::unique_ptr<DirectReduce> direct;
  std::byte* windows = nullptr;
  std::size_t window_stride = 0;
  bool cma = false;      // cross-memory attach between the node's processes, agreed at set-up
  std::string cma_note;  // Team::cross_memory_attach_note
  std::vector<Comm> comms;

  // The plans: over the node-by-node numbering with the hierarchy, and
  // (non-commutative operators on nodes of non-consecutive ranks) flat over
  // the communicator's order.
  Planner planner, user_order;

  // Arrival estimates (set when the allreduce is arrival-aware).
  bool arrival_aware = false;
  const AlgorithmInfo* warmup_allreduce = nullptr;  // the team default, run during the warm-up
  int max_threads = 1;
  Clock::time_point origin = Clock::now();
  // The tag of an arrival value from thread `from` to thread `to`: above every link tag.
  int arrival_tag(int from, int to) const { return 2 + max_threads * max_threads + from * max_threads + to; }

  std::mutex error_mutex;
  std::exception_ptr first_error;  // this process's, when it was the node's first

  ~TeamState();
  void set_up(MPI_Comm comm, int thread_count);
  void open_segment();
  void probe_cross_memory_attach();
  std::string peer_gone(int peer) const;
  void record_failure(std::exception_ptr e) noexcept;
  [[noreturn]] void rethrow_failure();
  std::byte* window_of(int rank) const {
    const auto i = std::lower_bound(node_members.begin(), node_members.end(), rank) - node_members.begin();
    return windows + static_cast<std::size_t>(i) * window_stride;
  }
};

// ---- Comm::Impl -----------------------------------------------------------------------

struct Comm::Impl {
  // One cached call (one piece: its count is per piece, per block for
  // allgather and reduce_scatter).
  struct Entry {
    bool over_internal;  // planned over the node-by-node numbering (else the communicator's)
    std::size_t element_bytes;
    std::vector<Step> steps;
    // Where rank v's block of `n` elements sits in the window's vector.
    std::size_t block_at(const TeamState& t, int v, std::uint64_t n) const {
      const int at = over_internal ? t.internal_of[static_cast<std::size_t>(v)] : v;
      return static_cast<std::size_t>(at) * static_cast<std::size_t>(n * element_bytes);
    }
  };

  TeamState* team;
  int rank;
  LinkRank link;
  std::optional<TeamDirectReduce> direct;  // when the team has a direct reduce
  MpiLink mpi;
  std::byte* window;        // in the node's segment: this rank's stage (LinkConfig::staged_sends)
  std::size_t piece_bytes;  // pieces keep every vector within this: half a window, or kAttachedPieceBytes
  // Private working memory: the working vector where the user's buffer
  // cannot serve (allgather's and reduce_scatter's block order, reduce's
  // non-roots), and the executor's scratch.
  std::vector<std::byte> work, scratch;
  PlanCache<Entry> cache;
  std::vector<Step> agree_steps;
  std::int64_t calls = 0;

  // Arrival estimates.
  ArrivalMonitor monitor;
  std::vector<MPI_Request> arrival_sends, arrival_recvs;  // per copse rank
  std::vector<std::int64_t> arrival_in;                   // per copse rank: the values of this call
  std::vector<int> arrival_done;                          // MPI_Testsome's indices
  std::int64_t arrival_out = 0;                           // this rank's value of the call
  std::vector<Picos> predicted;                           // internal order
  ArrivalKey agreed_key;
  std::vector<Picos> planned;  // copse order; empty: the last allreduce was not planned by arrival

  Impl(TeamState* t, int r)
      : team(t),
        rank(r),
        mpi(*t->channel, t->layout, r),
        window(t->window_of(r)),
        piece_bytes(t->cma ? kAttachedPieceBytes : t->window_stride / 2),
        cache(t->options.plan_cache, t->options.arrival.plans),
        monitor(t->options.arrival, t->arrival_aware) {
    if (t->arrival_aware) {
      arrival_sends.assign(static_cast<std::size_t>(t->ranks), MPI_REQUEST_NULL);
      arrival_recvs.assign(static_cast<std::size_t>(t->ranks), MPI_REQUEST_NULL);
      arrival_in.assign(static_cast<std::size_t>(t->ranks), 0);
      arrival_done.assign(static_cast<std::size_t>(t->ranks), 0);
    }
    monitor.returned(now(), false);
    link.rank = r;
    if (t->direct)
      direct.emplace(*t->engine, *t->direct, link, t->options.wait_timeout, t->options.wait_report,
                     wait_reporter(t->options.on_wait_report));
    link.stage = window;
    link.stage_bytes = t->window_stride;
    link.remote = &mpi;
    // The agreement: a binomial broadcast of one record from rank 0, planned once.
    const AlgorithmInfo& bcast = find_algorithm(Collective::bcast, "binomial");
    const Shape shape{t->ranks, kAgreeFields, 1, t->internal_of[0]};
    compile(plan_hierarchical(t->plan, bcast, shape), true, kAgreeFields, sizeof(std::int64_t), agree_steps);
  }

  ~Impl() {
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (finalized || arrival_sends.empty()) return;
    auto lock = team->channel->lock();
    for (auto& r : arrival_sends)
      if (r != MPI_REQUEST_NULL) PMPI_Request_free(&r);  // eager 8-byte sends: complete on their own
    cancel_arrival_receives();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  int internal() const { return team->internal_of[static_cast<std::size_t>(rank)]; }

  Picos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - team->origin).count() * 1000;
  }

  // ---- arrival estimates (node/arrival_monitor.hpp) ----

  // Sends this rank's value for the coming allreduce to every other rank.
  void publish(Picos value) {
    const int p = team->ranks;
    const int me = team->layout.thread(rank);
    auto lock = team->channel->lock();
    // The previous call's values were received before any rank could return
    // from that call, so these complete at once.
    check_mpi(PMPI_Waitall(p, arrival_sends.data(), MPI_STATUSES_IGNORE), "MPI_Waitall (arrival values)");
    arrival_out = value;
    for (int r = 0; r < p; ++r)
      if (r != rank)
        check_mpi(PMPI_Isend(&arrival_out, 1, MPI_INT64_T, team->layout.process(r),
                             team->arrival_tag(me, team->layout.thread(r)), team->channel->comm(),
                             &arrival_sends[static_cast<std::size_t>(r)]),
                  "MPI_Isend (arrival value)");
  }

  void cancel_arrival_receives() noexcept {
    for (auto& r : arrival_recvs)
      if (r != MPI_REQUEST_NULL) {
        PMPI_Cancel(&r);
        PMPI_Request_free(&r);
      }
  }

  // Every rank's value of this call, into `predicted` (internal order).
  void agree_arrival() {
    const int p = team->ranks;
    const int me = team->layout.thread(rank);
    {
      auto lock = team->channel->lock();
      for (int r = 0; r < p; ++r)
        if (r != rank)
          check_mpi(PMPI_Irecv(&arrival_in[static_cast<std::size_t>(r)], 1, MPI_INT64_T, team->layout.process(r),
                               team->arrival_tag(team->layout.thread(r), me), team->channel->comm(),
                               &arrival_recvs[static_cast<std::size_t>(r)]),
                    "MPI_Irecv (arrival value)");
    }
    arrival_in[static_cast<std::size_t>(rank)] = arrival_out;
    const CommOptions& o = team->options;
    PolledWait wait(team_wait_policy(o.wait_timeout, o.wait_report, wait_reporter(o.on_wait_report), [&] {
      std::vector<int> missing;  // MPI_Testsome nulls the completed requests
      for (int r = 0; r < p; ++r)
        if (arrival_recvs[static_cast<std::size_t>(r)] != MPI_REQUEST_NULL) missing.push_back(r);
      return arrival_wait_text(calls, rank, missing);
    }));
    try {
      for (int polls = 0;; ++polls) {
        int received = 0;
        {
          auto lock = team->channel->lock();
          team->channel->poll_notice();
          check_mpi(PMPI_Testsome(p, arrival_recvs.data(), &received, arrival_done.data(), MPI_STATUSES_IGNORE),
                    "MPI_Testsome (arrival values)");
        }
        if (received == MPI_UNDEFINED) break;  // no request left: every value is in
        if (team->engine->aborted()) team->rethrow_failure();
        wait.look();
        if (polls < 64)
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    } catch (...) {
      {
        auto lock = team->channel->lock();
        cancel_arrival_receives();
      }
      if (!team->engine->aborted()) team->engine->fail(std::current_exception());
      team->rethrow_failure();
    }
    predicted.resize(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r)
      predicted[static_cast<std::size_t>(team->internal_of[static_cast<std::size_t>(r)])] =
          arrival_in[static_cast<std::size_t>(r)];
  }

  // This rank's steps of `plan`, over internal ranks (renamed to copse ranks)
  // or over copse ranks.
  void compile(const SchedulePlan& plan, bool over_internal, std::uint64_t elements, std::size_t eb,
               std::vector<Step>& out) {
    // Scratch holds at most one receive.
    const std::uint64_t staged = compile_steps(plan, over_internal ? internal() : rank, team->ranks, elements, out);
    if (staged * eb > scratch.size()) scratch.resize(static_cast<std::size_t>(staged * eb));
    if (!over_internal || team->contiguous) return;
    for (Step& s : out) {
      if (s.send) s.send.peer = team->user_of[static_cast<std::size_t>(s.send.peer)];
      if (s.recv) s.recv.peer = team->user_of[static_cast<std::size_t>(s.recv.peer)];
    }
  }

  void run(const std::vector<Step>& steps, std::byte* y, const ReduceOp& op, Collective c) {
    LinkEngine& engine = *team->engine;
    if (engine.aborted()) team->rethrow_failure();
    link.round = calls++;
    link.activity = to_string(c);
    try {
      StepExecutor(engine).run(link, steps, y, scratch.data(), op);
    } catch (...) {
      team->rethrow_failure();
    }
    monitor.returned(now(), false);  // a computation phase begins (an allreduce also counts its call)
  }

  // Whether collective `c` of `bytes` runs through the direct reduce: it
  // must exist and fit, and the configuration must leave the choice to the
  // selection (an algorithm named in the options runs as a schedule).
  bool direct_fits(Collective c, std::size_t bytes) const {
    return team->direct && !team->arrival_aware && DirectReduce::fits(team->ranks, bytes) &&
           team->options.leaves_choice(c);
  }

  // An allreduce (or, without an operator, a barrier) through the direct
  // reduce; failures as run()'s.
  void run_direct(Collective c, const void* send, void* recv, std::size_t count, const ReduceOp* op) {
    if (team->engine->aborted()) team->rethrow_failure();
    link.round = calls++;
    try {
      direct->run(c, send, recv, count, op);
    } catch (...) {
      team->rethrow_failure();
    }
    monitor.returned(now(), false);
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
    // which the node-by-node numbering only keeps when nodes are consecutive.
    const bool hierarchical = team->contiguous || !reduces || commutative;
    CallKey key = team->options.call_key(c, count, eb, commutative, root, warmup);
    if (!hierarchical) key.form = Form::flat;
    if (arrival && hierarchical) key.arrival = *arrival;
    if (auto* found = cache.find(key, dtype, op ? op->identity.get() : nullptr)) return found->value;
    if (team->engine->aborted()) team->rethrow_failure();
    const int p = team->ranks;
    if ((c == Collective::reduce || c == Collective::bcast) && (root < 0 || root >= p))
      throw UsageError(std::string(to_string(c)) + ": root " + std::to_string(root) + " is not a rank in [0, " +
                       std::to_string(p) + ")");
    if (reduces && op && key.algorithm != kSelectAlgorithm)
      check_operator(find_algorithm(c, key.algorithm), op->name, op->commutative);
    const Planner& planner = hierarchical ? team->planner : team->user_order;
    CallKey internal_key = key;
    if (hierarchical) internal_key.root = team->internal_of[static_cast<std::size_t>(root)];
    std::optional<CompiledPlan> plan = agree_plan(c, total, dtype, planner, internal_key);
    Entry e{hierarchical, eb, {}};
    compile(plan->plan, hierarchical, vector_elements(c, plan->shape), eb, e.steps);
    return cache.insert({key, dtype, op ? op->identity : nullptr, std::move(e)}).value;
  }

  // Rank 0 plans `key` and tells everyone what it chose (form, algorithm,
  // blocks), with its view of the call; the others check the call and
  // build that plan (the planner is deterministic, and with form, algorithm
  // and blocks given it neither selects nor tunes). A plan rank 0 cannot
  // make fails the call on every rank alike (no rank is left waiting).
  std::optional<CompiledPlan> agree_plan(Collective c, std::uint64_t total, DType dtype, const Planner& planner,
                                         CallKey key) {
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
    ReduceOp record;
    record.name = "copy";
    record.dtype = DType::int64;
    record.element_bytes = sizeof(std::int64_t);
    run(agree_steps, reinterpret_cast<std::byte*>(zeros), record, c);
    if (!std::equal(mine, mine + kCallFields, zeros)) {
      auto call = [](const std::int64_t* f) {
        std::string text = std::string(to_string(static_cast<Collective>(f[0]))) + " of " + std::to_string(f[1]) +
                           " elements of " + std::to_string(f[3]) + " bytes (" +
                           std::string(to_string(static_cast<DType>(f[4]))) + ")";
        if (f[1] != f[2]) text += " in pieces of " + std::to_string(f[2]);
        if (f[0] == static_cast<std::int64_t>(Collective::reduce) ||
            f[0] == static_cast<std::int64_t>(Collective::bcast))
          text += ", root " + std::to_string(f[5]);
        if (!f[6]) text += ", non-commutative operator";
        return text;
      };
      fail(ScheduleError("mismatched calls: rank " + std::to_string(rank) + " calls " + call(mine) +
                         ", but rank 0 calls " + call(zeros)));
    }
    if (zeros[8] < 0)
      throw UsageError(rank == 0 ? refusal
                                 : "this " + std::string(to_string(c)) + " cannot be planned (rank 0 says why)");
    if (plan) return plan;
    key.form = static_cast<Form>(zeros[7]);
    key.algorithm = algorithms()[static_cast<std::size_t>(zeros[8])].name;
    key.blocks = static_cast<int>(zeros[9]);
    key.runtime_default = false;
    return planner.plan(key);
  }

  // Elements of `eb` bytes per piece of a vector, and per block of a piece
  // of p blocks.
  std::uint64_t piece(std::size_t eb) const {
    if (eb > piece_bytes)
      throw UsageError("an element of " + std::to_string(eb) + " bytes does not fit a piece of " +
                       std::to_string(piece_bytes) + " bytes");
    return eb == 0 ? 1 : piece_bytes / eb;
  }
  std::uint64_t block_piece(std::size_t eb) const {
    const std::uint64_t per = eb == 0 ? 1 : piece_bytes / (eb * static_cast<std::uint64_t>(team->ranks));
    if (per == 0)
      throw UsageError("a window of " + std::to_string(team->window_stride) + " bytes is too small for blocks of " +
                       std::to_string(eb) + "-byte elements from " + std::to_string(team->ranks) +
                       " ranks: set window_bytes to at least " + std::to_string(2 * eb * team->ranks));
    return per;
  }

  // Private working memory of at least `bytes`.
  std::byte* work_vector(std::size_t bytes) {
    if (work.size() < std::max<std::size_t>(bytes, 1)) work.resize(std::max<std::size_t>(bytes, 1));
    return work.data();
  }

  static ReduceOp data_op(DType dtype, std::size_t eb) {
    ReduceOp op;
    op.name = "copy";
    op.dtype = dtype;
    op.element_bytes = eb;
    return op;
  }

  // Reduce-scatter over blocks of `block` elements; rank v's block holds
  // counts[v] elements of `in` from displs[v] (the rest is padding).
  void reduce_scatter_blocks(const std::byte* in, std::byte* out, const std::vector<std::uint64_t>& counts,
                             const std::vector<std::uint64_t>& displs, std::uint64_t block, const ReduceOp& op);
};

// ---- Team set-up ----------------------------------------------------------------------

TeamState::~TeamState() {
  int finalized = 0;
  PMPI_Finalized(&finalized);
  // After a failure, messages of the failed collective (data whose receive
  // was withdrawn, another process's notice) may still be on their way to
  // this process. Open MPI keeps a message for a communicator it does not
  // know and delivers it to the next communicator that gets the same id,
  // whose traffic it then disorders; so a failed team's duplicate stays
  // allocated (one communicator per failure), with its notice receive posted.
  const bool failed = (engine && engine->aborted()) || (!finalized && channel && channel->failed());
  comms.clear();
  engine.reset();
  arena.reset();
  if (failed) (void)channel.release();
  channel.reset();
  if (finalized) return;
  if (node_comm != MPI_COMM_NULL) PMPI_Comm_free(&node_comm);
  if (dup != MPI_COMM_NULL && !failed) PMPI_Comm_free(&dup);
}

void TeamState::set_up(MPI_Comm comm, int thread_count) {
  int inter = 0;
  check_mpi(PMPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  if (inter) throw UsageError("copse serves intracommunicators only");
  // Everything of copse's travels on a private duplicate; its errors return
  // (and become copse errors) rather than abort the job.
  check_mpi(PMPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
  check_mpi(PMPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int processes = 0;
  check_mpi(PMPI_Comm_rank(dup, &process), "MPI_Comm_rank");
  check_mpi(PMPI_Comm_size(dup, &processes), "MPI_Comm_size");
  threads = thread_count;

  // Options are checked before the first exchange, whose ok flag makes a
  // mistake on one process an error on all (instead of a hang).
  std::exception_ptr local;
  ProcessInfo me;
  try {
    if (thread_count < 1)
      throw UsageError("a process brings at least 1 thread rank, got " + std::to_string(thread_count));
    if (options.ranks_per_node < 0)
      throw UsageError("ranks_per_node must not be negative, got " + std::to_string(options.ranks_per_node));
    if (options.window_bytes < 8192 || options.window_bytes > (std::size_t{1} << 30))
      throw UsageError("window_bytes must lie in [8 KiB, 1 GiB], got " + std::to_string(options.window_bytes));
    if (options.plan_cache < 1) throw UsageError("plan_cache must be at least 1");
    check_arrival_options(options.arrival);
    if (options.wait_timeout && options.wait_timeout->count() <= 0)
      throw UsageError("the wait timeout must be positive");
    if (options.wait_report.count() < 0) throw UsageError("the wait report interval must not be negative");
    for (Collective c : all_collectives()) (void)find_algorithm(c, algorithm_name(options, c));
    check_mpi(PMPI_Query_thread(&me.level), "MPI_Query_thread");
    me.threads = thread_count;
    me.pid = static_cast<int>(getpid());
    me.pu = bound_pu();
  } catch (...) {
    local = std::current_exception();
    me.ok = 0;
  }
  std::vector<ProcessInfo> info(static_cast<std::size_t>(processes));
  static_assert(sizeof(ProcessInfo) == 5 * sizeof(int));
  check_mpi(PMPI_Allgather(&me, 5, MPI_INT, info.data(), 5, MPI_INT, dup), "MPI_Allgather (copse set-up)");
  if (local) std::rethrow_exception(local);
  for (int q = 0; q < processes; ++q)
    if (!info[static_cast<std::size_t>(q)].ok)
      throw UsageError("process " + std::to_string(q) +
                       " of the communicator gave copse invalid options (its error says which)");
  max_threads = 1;
  for (int q = 0; q < processes; ++q) {
    const ProcessInfo& i = info[static_cast<std::size_t>(q)];
    if (i.threads > 1 && i.level < MPI_THREAD_SERIALIZED)
      throw UsageError("process " + std::to_string(q) + " brings " + std::to_string(i.threads) +
                       " thread ranks, which needs MPI_THREAD_SERIALIZED or above (copse calls MPI from one thread "
                       "at a time); MPI provides " +
                       thread_level_name(i.level) + ": initialise it with MPI_Init_thread");
    max_threads = std::max(max_threads, i.threads);
    pid_of.push_back(i.pid);
  }
  if (find_algorithm(Collective::allreduce, algorithm_name(options, Collective::allreduce)).arrival_aware) {
    arrival_aware = true;
    warmup_allreduce = &find_algorithm(Collective::allreduce, team_defaults::allreduce);
    void* value = nullptr;
    int found = 0;
    check_mpi(PMPI_Comm_get_attr(dup, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
    const long long tag_ub = found ? *static_cast<int*>(value) : 32767;
    if (arrival_tag(max_threads - 1, max_threads - 1) > tag_ub)
      throw UsageError("arrival estimates with " + std::to_string(max_threads) +
                       " thread ranks per process need tags beyond this MPI's MPI_TAG_UB " + std::to_string(tag_ub));
  }

  // Nodes: the shared-memory islands, cut into virtual nodes of K
  // consecutive processes if asked -- consecutive in MPI_COMM_WORLD, since a
  // process's node is the process's, as a host is, whatever communicator it
  // is seen through (a communicator split in another order then has nodes
  // of non-consecutive ranks, as on a real cluster). Nodes are numbered by
  // their lowest rank.
  MPI_Comm island = MPI_COMM_NULL;
  check_mpi(PMPI_Comm_split_type(dup, MPI_COMM_TYPE_SHARED, process, MPI_INFO_NULL, &island), "MPI_Comm_split_type");
  // Ranks on this host, for the waits' spinning: the job's processes here
  // (as the launcher says), else the communicator's.
  int island_size = 1;
  check_mpi(PMPI_Comm_size(island, &island_size), "MPI_Comm_size (island)");
  ranks_on_host = island_size * thread_count;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 0)
      ranks_on_host = std::max(ranks_on_host, std::atoi(v) * thread_count);
  if (options.ranks_per_node > 0) {
    int world_rank = 0;
    check_mpi(PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank (MPI_COMM_WORLD)");
    const int rc = PMPI_Comm_split(island, world_rank / options.ranks_per_node, process, &node_comm);
    PMPI_Comm_free(&island);
    check_mpi(rc, "MPI_Comm_split (virtual nodes)");
  } else {
    node_comm = island;
  }
  int leader = process;  // the node's lowest rank: rank 0 of node_comm (keys are ranks)
  check_mpi(PMPI_Bcast(&leader, 1, MPI_INT, 0, node_comm), "MPI_Bcast (node leader)");
  std::vector<int> leader_of(static_cast<std::size_t>(processes));
  check_mpi(PMPI_Allgather(&leader, 1, MPI_INT, leader_of.data(), 1, MPI_INT, dup), "MPI_Allgather (nodes)");

  // Copse ranks and their places; the node-by-node numbering.
  std::vector<RankMap::Place> places;
  std::vector<int> node_of_process = leader_of;  // renumbered by RankMap::from_places: nodes in order of first rank
  for (int q = 0; q < processes; ++q) {
    if (q == process) first_rank = static_cast<int>(places.size());
    for (int t = 0; t < info[static_cast<std::size_t>(q)].threads; ++t)
      places.push_back({leader_of[static_cast<std::size_t>(q)], q, t, q});
  }
  ranks = static_cast<int>(places.size());
  layout = RankMap::from_places(std::move(places));
  std::vector<std::vector<int>> members_of(static_cast<std::size_t>(layout.nodes()));
  for (int r = 0; r < ranks; ++r) members_of[static_cast<std::size_t>(layout.node(r))].push_back(r);
  for (const auto& members : members_of)
    for (int r : members) user_of.push_back(r);
  internal_of.assign(static_cast<std::size_t>(ranks), 0);
  for (int i = 0; i < ranks; ++i) internal_of[static_cast<std::size_t>(user_of[static_cast<std::size_t>(i)])] = i;
  for (int r = 0; r < ranks; ++r) contiguous = contiguous && internal_of[static_cast<std::size_t>(r)] == r;
  const int my_node = layout.node(first_rank);
  node_members = members_of[static_cast<std::size_t>(my_node)];

  // The hierarchy: each leader plans its own node, everyone assembles.
  std::vector<int> mine;
  if (leader == process) {
    std::vector<int> pus;
    for (int r : node_members) pus.push_back(info[static_cast<std::size_t>(layout.process(r))].pu);
    mine = plan_own_node(options, pus);
  }
  const int length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(processes)), displs(static_cast<std::size_t>(processes));
  check_mpi(PMPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, dup), "MPI_Allgather (plans)");
  std::partial_sum(lengths.begin(), lengths.end() - 1, displs.begin() + 1);
  std::vector<int> all(static_cast<std::size_t>(displs.back() + lengths.back()));
  check_mpi(PMPI_Allgatherv(mine.data(), length, MPI_INT, all.data(), lengths.data(), displs.data(), MPI_INT, dup),
            "MPI_Allgatherv (plans)");
  auto whole = std::make_shared<HierarchyPlan>();
  whole->ranks = ranks;
  whole->multi_leader = options.multi_leader;
  whole->grouping = options.grouping.to_string();
  for (int n = 0, first = 0; n < layout.nodes(); ++n) {
    const auto& members = members_of[static_cast<std::size_t>(n)];
    const int node_leader = layout.process(members.front());
    append_node_plan(*whole, n, first, static_cast<int>(members.size()),
                     all.data() + displs[static_cast<std::size_t>(node_leader)]);
    first += static_cast<int>(members.size());
  }
  plan = whole;
  plan_nodes = RankMap::from_nodes(plan->node_of);

  channel = std::make_unique<MpiChannel>(dup, max_threads);
  for (int r : node_members) {
    const int q = layout.process(r);
    if (q != process && !watches.count(q))
      watches.emplace(q, std::make_unique<ProcessWatch>(static_cast<pid_t>(pid_of[static_cast<std::size_t>(q)])));
  }
  open_segment();
  probe_cross_memory_attach();

  LinkConfig link;
  link.layout = layout;
  link.members = node_members;
  link.virtual_clock = false;
  link.staged_sends = true;  // working vectors are the user's buffers or private memory
  link.cross_memory_attach = cma;
  link.attach_from_bytes = kAttachFromBytes;
  link.ranks_on_host = ranks_on_host;
  link.wait_timeout = options.wait_timeout;
  link.report_every = options.wait_report;
  link.on_wait_report = wait_reporter(options.on_wait_report);
  link.round_name = "call";
  link.peer_gone = [this](int peer) { return peer_gone(peer); };
  link.on_failure = [this](std::exception_ptr e) { record_failure(std::move(e)); };
  const auto* root = arena->at<SegmentRoot>(arena->root());
  engine = std::make_unique<LinkEngine>(*arena, root->link, std::move(link));
  if (root->direct != 0)
    direct = std::make_unique<DirectReduce>(*arena, root->direct, static_cast<int>(node_members.size()),
                                            engine->spin_policy());
}

// The node's segment: the leader creates it (every page reserved, mode
// 0600) under a name no other segment of this host has -- its pid and a
// per-process count -- and lays it out; the others open it; once all have
// it mapped, the leader unlinks the name, so nothing is left in /dev/shm
// whatever happens later.
void TeamState::open_segment() {
  static std::atomic<std::uint64_t> serial{0};
  int node_rank = 0;
  check_mpi(PMPI_Comm_rank(node_comm, &node_rank), "MPI_Comm_rank (node)");
  const std::size_t local = node_members.size();
  window_stride = round_up(options.window_bytes, 4096);
  char name[64] = {};
  std::exception_ptr failure;
  if (node_rank == 0) {
    try {
      std::snprintf(name, sizeof name, "/copse-%d-%llu", static_cast<int>(getpid()),
                    static_cast<unsigned long long>(serial++));
      const bool one_node = layout.nodes() == 1 && DirectReduce::serves(static_cast<int>(local));
      const std::size_t bytes = 4096 + sizeof(SegmentRoot) + sizeof(NodeShared) + 1024 * (local + 1) +
                                local * window_stride + 4096 +
                                (one_node ? DirectReduce::shared_bytes(static_cast<int>(local)) + 64 : 0);
      arena = std::make_unique<ShmArena>(ShmArena::Create{}, name, bytes);
      const Arena::Offset root_at = arena->allocate(sizeof(SegmentRoot), 64);
      auto* root = new (arena->address(root_at)) SegmentRoot{};
      root->node = arena->allocate(sizeof(NodeShared), 64);
      new (arena->address(root->node)) NodeShared{};
      root->link = LinkEngine::create_shared(*arena, static_cast<int>(local));
      root->windows = arena->allocate(local * window_stride, 4096);
      root->window_stride = window_stride;
      if (one_node) root->direct = DirectReduce::create_shared(*arena, static_cast<int>(local));
      arena->set_root(root_at);
    } catch (...) {
      failure = std::current_exception();
      name[0] = '\0';
    }
  }
  check_mpi(PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, node_comm), "MPI_Bcast (segment name)");
  if (node_rank != 0 && name[0] != '\0') {
    try {
      arena = std::make_unique<ShmArena>(ShmArena::Open{}, name);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // Every process of the node has it mapped (or has failed): unlink.
  const int barrier = PMPI_Barrier(node_comm);
  if (node_rank == 0 && name[0] != '\0') ShmArena::remove(name);
  check_mpi(barrier, "MPI_Barrier (segment)");
  agree(dup, failure);
  const auto* root = arena->at<SegmentRoot>(arena->root());
  node = arena->at<NodeShared>(root->node);
  windows = arena->address(root->windows);
}

// Cross-memory attach: every process reads a word of each node peer's
// private memory with process_vm_readv, as the link engine will read their
// buffers, and the whole communicator agrees to use it only if every read
// returned the word -- everywhere, not per node, because the pieces a
// collective runs in depend on it and every process must cut the same ones.
// Automatic: each process also times reading 1 MiB of its next node peer's
// memory against copying 1 MiB itself, and refuses the read where it costs
// more than 1.5 copies: it replaces the window's two, but the sender's copy
// into its stage often runs in parallel with the receiver's work (in an
// exchange, on the other core), so the break-even lies between one copy and
// two. (Measured on a 2-core AMD EPYC virtual machine: 75 us against 19 us,
// and an allreduce of 1 MiB twice as slow with it.) A refusal is no error:
// the window serves, and the note says why.
void TeamState::probe_cross_memory_attach() {
  using Attach = CommOptions::Attach;
  const auto me = static_cast<std::int64_t>(getpid());
  // On this stack and heap, which no peer leaves before the agreement below,
  // i.e. before every peer has read them. Volatile: really in memory.
  volatile std::uint64_t word = kProbeWord ^ static_cast<std::uint64_t>(me);
  const bool timed = options.cross_memory_attach == Attach::automatic;
  std::vector<std::byte> sample(timed ? kProbeSampleBytes : 0, std::byte{1});
  const std::int64_t mine[4] = {static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&word)), me, process,
                                static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(sample.data()))};
  int node_size = 0, node_rank = 0;
  check_mpi(PMPI_Comm_size(node_comm, &node_size), "MPI_Comm_size (node)");
  check_mpi(PMPI_Comm_rank(node_comm, &node_rank), "MPI_Comm_rank (node)");
  std::vector<std::int64_t> all(4 * static_cast<std::size_t>(node_size));
  check_mpi(PMPI_Allgather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, node_comm),
            "MPI_Allgather (cross-memory attach probe)");
  int ok = options.cross_memory_attach == Attach::off ? 0 : 1;
  cma_note = ok ? "" : "off (not asked for)";
  for (std::size_t i = 0; ok && i < static_cast<std::size_t>(node_size); ++i) {
    const std::int64_t pid = all[4 * i + 1], peer = all[4 * i + 2];
    if (pid == me) continue;
    std::uint64_t got = 0;
    const int error =
        cross_memory_read(static_cast<int>(pid), static_cast<std::uint64_t>(all[4 * i]), &got, sizeof got);
    if (error == 0 && got == (kProbeWord ^ static_cast<std::uint64_t>(pid))) continue;
    ok = 0;
    cma_note = "off: process " + std::to_string(process) + " cannot read the memory of process " +
               std::to_string(peer) + " (pid " + std::to_string(pid) +
               ") by process_vm_readv: " + (error ? std::strerror(error) : "it read another value");
  }
  if (ok && timed && node_size > 1) {
    const auto next = static_cast<std::size_t>((node_rank + 1) % node_size);
    const auto pid = static_cast<int>(all[4 * next + 1]);
    const auto from = static_cast<std::uint64_t>(all[4 * next + 3]);
    std::vector<std::byte> to(kProbeSampleBytes, std::byte{0});
    using Micros = std::chrono::duration<double, std::micro>;
    double read = 1e30, copy = 1e30;  // the best of a few, as a warm run would see
    bool failed = false;
    for (int rep = 0; rep < 5 && !failed; ++rep) {
      auto t0 = Clock::now();
      failed = cross_memory_read(pid, from, to.data(), to.size()) != 0;
      read = failed ? 1e30 : std::min(read, Micros(Clock::now() - t0).count());
      t0 = Clock::now();
      std::memcpy(to.data(), sample.data(), to.size());
      asm volatile("" : : "r"(to.data()) : "memory");  // the copy is used
      copy = std::min(copy, Micros(Clock::now() - t0).count());
    }
    if (failed) {
      ok = 0;
      cma_note = "off: process " + std::to_string(process) + " failed to read 1 MiB of a node peer by process_vm_readv";
    } else if (read > 1.5 * copy) {
      ok = 0;
      char text[256];
      std::snprintf(text, sizeof text,
                    "off: process_vm_readv read 1 MiB in %.0f us on process %d, more than 1.5 times the %.0f us of "
                    "a local copy (the window's two copies, one often made in parallel by the sender)",
                    read, process, copy);
      cma_note = text;
    }
  }
  int everywhere = 0;
  check_mpi(PMPI_Allreduce(&ok, &everywhere, 1, MPI_INT, MPI_MIN, dup), "MPI_Allreduce (cross-memory attach)");
  cma = everywhere == 1;
  if (cma) cma_note = "on";
  if (ok && !cma) cma_note = "off: another process cannot use it (its note says why)";
}

// ---- failure ----------------------------------------------------------------------------

std::string TeamState::peer_gone(int peer) const {
  const int q = layout.process(peer);
  const auto it = watches.find(q);
  if (it == watches.end() || !it->second->gone()) return "";
  return "its process (MPI rank " + std::to_string(q) + ", pid " + std::to_string(it->second->pid()) + ") has died";
}

void TeamState::record_failure(std::exception_ptr e) noexcept {
  const auto [kind, text] = describe_exception(e);
  bool from_peer = false;
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure&) {
    from_peer = true;
  } catch (...) {
  }
  if (node && node->failure_claimed.exchange(1, std::memory_order_acq_rel) == 0) {
    {
      std::lock_guard<std::mutex> lock(error_mutex);
      first_error = e;
    }
    node->failure_kind = static_cast<std::int32_t>(kind);
    const std::size_t n = std::min(text.size(), sizeof node->failure_text - 1);
    std::memcpy(node->failure_text, text.data(), n);
    node->failure_text[n] = '\0';
    node->failure_ready.store(1, std::memory_order_release);
  }
  // Ranks of other nodes may wait for this one: tell them (a notice that
  // came from elsewhere has been told already).
  if (!from_peer && channel) channel->notify(kind, text);
}

void TeamState::rethrow_failure() {
  {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (first_error) std::rethrow_exception(first_error);
  }
  // Another process of the node failed first: it wrote the record before
  // aborting the engine, so an aborted rank finds it (give a writer that is
  // between its claim and its text a moment).
  for (int i = 0; i < 1000 && node && node->failure_claimed.load(std::memory_order_acquire); ++i) {
    if (node->failure_ready.load(std::memory_order_acquire))
      throw_as(static_cast<ErrorKind>(node->failure_kind), node->failure_text);
    sched_yield();
  }
  if (std::current_exception()) throw;
  throw LinkAborted();
}

// ---- Team ---------------------------------------------------------------------------------

struct Team::Impl : TeamState {};

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
  make_planners(*impl_);
  impl_->comms.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t)
    impl_->comms.push_back(Comm(std::make_unique<Comm::Impl>(impl_.get(), impl_->first_rank + t)));
}

Team::~Team() = default;

int Team::size() const { return impl_->ranks; }
const RankMap& Team::layout() const { return impl_->layout; }
const HierarchyPlan& Team::plan() const { return *impl_->plan; }
bool Team::cross_memory_attach() const { return impl_->cma; }
const std::string& Team::cross_memory_attach_note() const { return impl_->cma_note; }
std::uint64_t Team::attached_bytes() const { return impl_->engine->attached_bytes(); }

Comm& Team::comm(int thread) {
  if (thread < 0 || thread >= impl_->threads)
    throw UsageError("thread " + std::to_string(thread) + " is not one of this process's " +
                     std::to_string(impl_->threads) + " thread ranks");
  return impl_->comms[static_cast<std::size_t>(thread)];
}

// ---- Comm -----------------------------------------------------------------------------------

Comm::Comm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;
Comm::Comm(Comm&&) noexcept = default;

int Comm::rank() const { return impl_->rank; }
int Comm::size() const { return impl_->team->ranks; }
std::size_t Comm::cached_plans() const { return impl_->cache.size(); }

namespace {

const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }
std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}

// Calls body(offset, n) for consecutive pieces of at most `piece` of
// `count` elements -- once, with n = 0, for an empty vector, so that every
// rank runs (and agrees on) the same calls.
template <class Body>
void in_pieces(std::uint64_t count, std::uint64_t piece, Body&& body) {
  std::uint64_t offset = 0;
  do {
    const std::uint64_t n = std::min(piece, count - offset);
    body(offset, n);
    offset += n;
  } while (offset < count);
}

}  // namespace

void Comm::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  Impl& m = *impl_;
  const std::size_t eb = op.element_bytes;
  if (m.direct_fits(Collective::allreduce, count * eb)) {
    m.run_direct(Collective::allreduce, send, recv, count, &op);
    m.monitor.returned(m.now(), true);
    return;
  }
  const std::byte* in = send == recv ? bytes_of(recv) : bytes_of(send);
  bool warmup = false;
  const ArrivalKey* key = nullptr;
  if (m.team->arrival_aware) {  // node/arrival_monitor.hpp
    const std::int64_t call = m.monitor.call();
    const Picos begin = m.monitor.estimator().phase_begin();
    if (auto value = m.monitor.arrive(m.now())) m.publish(*value - begin);
    if (m.monitor.planned_by_arrival(call)) {
      m.agree_arrival();
      arrival_key(m.predicted, m.team->options.arrival.resolution, m.agreed_key);
      key = &m.agreed_key;
      const std::vector<Picos> internal = arrival_of(m.agreed_key);
      m.planned.resize(internal.size());
      for (std::size_t r = 0; r < internal.size(); ++r)
        m.planned[r] = internal[static_cast<std::size_t>(m.team->internal_of[r])];
    } else {
      warmup = true;
      m.planned.clear();
    }
  }
  in_pieces(count, m.piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::allreduce, count, n, op.dtype, eb, &op, 0, warmup, key);
    // The user's receive buffer is the working vector.
    std::byte* y = bytes_of(recv) + at * eb;
    copy_bytes(y, in + at * eb, n * eb);
    m.run(e.steps, y, op, Collective::allreduce);
  });
  m.monitor.returned(m.now(), true);
}

void Comm::edge(double fraction) {
  Impl& m = *impl_;
  if (auto value = m.monitor.edge(m.now(), fraction)) m.publish(*value - m.monitor.estimator().phase_begin());
}

const std::vector<Picos>& Comm::planned_arrival() const { return impl_->planned; }

void Comm::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  Impl& m = *impl_;
  const std::size_t eb = op.element_bytes;
  in_pieces(count, m.piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::reduce, count, n, op.dtype, eb, &op, root);
    // The root works in its receive buffer, the others in private memory.
    std::byte* y = m.rank == root ? bytes_of(recv) + at * eb : m.work_vector(n * eb);
    copy_bytes(y, bytes_of(send) + at * eb, n * eb);
    m.run(e.steps, y, op, Collective::reduce);
  });
}

void Comm::bcast(void* buffer, std::size_t count, DType dtype, int root) {
  Impl& m = *impl_;
  const std::size_t eb = dtype_size(dtype);
  const ReduceOp op = Impl::data_op(dtype, eb);
  in_pieces(count, m.piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::bcast, count, n, dtype, eb, nullptr, root);
    m.run(e.steps, bytes_of(buffer) + at * eb, op, Collective::bcast);
  });
}

void Comm::barrier() {
  // One element of zero bytes: the schedule's messages carry no data.
  Impl& m = *impl_;
  if (m.direct_fits(Collective::barrier, 0)) return m.run_direct(Collective::barrier, nullptr, nullptr, 0, nullptr);
  auto& e = m.entry(Collective::barrier, 1, 1, DType::uint8, 0, nullptr, 0);
  m.run(e.steps, m.work_vector(0), Impl::data_op(DType::uint8, 0), Collective::barrier);
}

void Comm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  Impl& m = *impl_;
  const std::size_t eb = dtype_size(dtype);
  const ReduceOp op = Impl::data_op(dtype, eb);
  const auto p = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank());
  // In place: the contribution is already at its block of recv.
  const std::byte* mine = send == recv ? bytes_of(recv) + me * count * eb : bytes_of(send);
  in_pieces(count, m.block_piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = m.entry(Collective::allgather, count, n, dtype, eb, nullptr, 0);
    // Blocks sit in the schedule's order in the window.
    // The user's receive buffer is the working vector when its blocks are
    // in the schedule's order and the call runs in one piece.
    const bool direct = n == count && (m.team->contiguous || !e.over_internal);
    std::byte* y = direct ? bytes_of(recv) : m.work_vector(p * n * eb);
    copy_bytes(y + e.block_at(*m.team, rank(), n), mine + at * eb, n * eb);
    m.run(e.steps, y, op, Collective::allgather);
    if (!direct)
      for (std::size_t v = 0; v < p; ++v)
        copy_bytes(bytes_of(recv) + (v * count + at) * eb, y + e.block_at(*m.team, static_cast<int>(v), n), n * eb);
  });
}

void Comm::Impl::reduce_scatter_blocks(const std::byte* in, std::byte* out, const std::vector<std::uint64_t>& counts,
                                       const std::vector<std::uint64_t>& displs, std::uint64_t block,
                                       const ReduceOp& op) {
  const std::size_t eb = op.element_bytes;
  const auto me = static_cast<std::size_t>(rank);
  in_pieces(block, block_piece(eb), [&](std::uint64_t at, std::uint64_t n) {
    auto& e = entry(Collective::reduce_scatter, block, n, op.dtype, eb, &op, 0);
    std::byte* y = work_vector(counts.size() * n * eb);
    for (std::size_t v = 0; v < counts.size(); ++v) {
      const std::uint64_t real = counts[v] > at ? std::min(n, counts[v] - at) : 0;
      std::byte* to = y + e.block_at(*team, static_cast<int>(v), n);
      copy_bytes(to, in + (displs[v] + at) * eb, real * eb);
      if (real < n) std::memset(to + real * eb, 0, (n - real) * eb);  // padding: combined, never read
    }
    run(e.steps, y, op, Collective::reduce_scatter);
    // In place, this overwrites input only where this piece has read it.
    const std::uint64_t real = counts[me] > at ? std::min(n, counts[me] - at) : 0;
    copy_bytes(out + at * eb, y + e.block_at(*team, rank, n), real * eb);
  });
}

void Comm::reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  const auto p = static_cast<std::size_t>(size());
  std::vector<std::uint64_t> counts(p, count), displs(p);
  for (std::size_t v = 0; v < p; ++v) displs[v] = v * count;
  impl_->reduce_scatter_blocks(send == recv ? bytes_of(recv) : bytes_of(send), bytes_of(recv), counts, displs, count,
                               op);
}

void Comm::reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  const auto p = static_cast<std::size_t>(size());
  std::vector<std::uint64_t> sizes(p), displs(p);
  std::uint64_t block = 0, at = 0;
  for (std::size_t v = 0; v < p; ++v) {
    if (counts[v] < 0) throw UsageError("reduce_scatter: rank " + std::to_string(v) + "'s count is negative");
    sizes[v] = static_cast<std::uint64_t>(counts[v]);
    displs[v] = at;
    at += sizes[v];
    block = std::max(block, sizes[v]);
  }
  impl_->reduce_scatter_blocks(send == recv ? bytes_of(recv) : bytes_of(send), bytes_of(recv), sizes, displs, block,
                               op);
}

}  // namespace copse::mpi
