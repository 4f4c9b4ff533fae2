#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "common/error.hpp"
#include "plan/arrival_monitor.hpp"
#include "plan/planner.hpp"
#include "runtime/mpi_cores.hpp"
#include "runtime/mpi_hierarchy_wire.hpp"
#include "runtime/mpi_team_state.hpp"
#include "runtime/team_wait.hpp"

// The team's set-up (TeamState::set_up) and its end.

namespace copse::mpi {

namespace {

// Cross-memory attach: sends to node peers of at least this many bytes are
// read by the receiver out of the sender's buffer, smaller ones go through
// the sender's stage (one system call costs about as much as copying a few
// KiB twice; see the link engine's LinkConfig::attach_from_bytes).
constexpr std::size_t kAttachFromBytes = std::size_t{16} << 10;

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
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

}  // namespace

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

  const std::vector<ProcessInfo> info = gather_processes(processes, thread_count);
  const std::vector<int> leader_of = form_nodes(processes, thread_count);
  const std::vector<std::vector<int>> members_of = number_ranks(info, leader_of, processes);
  assemble_hierarchy(info, members_of, processes, leader_of[static_cast<std::size_t>(process)]);

  channel = std::make_unique<MpiChannel>(dup, max_threads);
  start_watches();
  open_segment();
  // The masks of every process on this machine, its node's and any other
  // node's sharing its cores (hosts made of namespaces on one machine).
  const MachineCores machine = agree_concurrent_ranks(dup, thread_count, ranks_on_host);
  ranks_on_host = machine.ranks;
  const int concurrent = machine.concurrent;
  probe_cross_memory_attach(concurrent);

  LinkConfig link;
  link.members = node_members;
  link.staged_sends = true;  // working vectors are the user's buffers or private memory
  link.cross_memory_attach = attach_use != AttachUse::none;
  link.attach_from_bytes = attach_use == AttachUse::every ? kAttachFromBytes : kNeverAttach;
  link.fast_attach = attach_use == AttachUse::every || (attach_use == AttachUse::allgather && reads_beat_ring);
  link.ranks_on_host = ranks_on_host;
  link.concurrent_ranks = concurrent;
  const auto* root = arena->at<SegmentRoot>(arena->root());
  engine = std::make_unique<LinkEngine>(
      *arena, root->link,
      executor_config(
          layout, std::nullopt, team_waits(options.wait_timeout, options.wait_report, options.on_wait_report),
          [this](std::exception_ptr e) { record_failure(std::move(e)); }, [this](int peer) { return peer_gone(peer); }),
      std::move(link));
  if (root->direct != 0)
    direct = std::make_unique<DirectReduce>(*arena, root->direct, static_cast<int>(node_members.size()),
                                            engine->spin_policy());
}

// Checks the options and learns every process's: thread ranks, thread level,
// pid and binding (ProcessInfo), and the tags the arrival values need.
std::vector<ProcessInfo> TeamState::gather_processes(int processes, int thread_count) {
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
    options.check();
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
    void* value = nullptr;
    int found = 0;
    check_mpi(PMPI_Comm_get_attr(dup, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
    const long long tag_ub = found ? *static_cast<int*>(value) : 32767;
    MpiChannel::require_tags(TagSpace::arrival, max_threads, tag_ub);
  }
  return info;
}

// Forms node_comm and returns every process's node leader (its lowest rank).
std::vector<int> TeamState::form_nodes(int processes, int thread_count) {
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
  return leader_of;
}

// Sets the copse ranks (layout, first_rank, ranks, internal_of, user_of,
// contiguous, node_members) and returns each node's ranks, ascending.
std::vector<std::vector<int>> TeamState::number_ranks(const std::vector<ProcessInfo>& info,
                                                      const std::vector<int>& leader_of, int processes) {
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
  return members_of;
}

// Sets plan and plan_nodes; `leader` is this process's node leader.
void TeamState::assemble_hierarchy(const std::vector<ProcessInfo>& info,
                                   const std::vector<std::vector<int>>& members_of, int processes, int leader) {
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
}

// ---- Team: what the set-up found ----

Team::~Team() = default;

int Team::size() const { return impl_->ranks; }
const RankMap& Team::layout() const { return impl_->layout; }
const HierarchyPlan& Team::plan() const { return *impl_->plan; }
bool Team::cross_memory_attach() const { return impl_->attach_use != TeamState::AttachUse::none; }
const std::string& Team::cross_memory_attach_note() const { return impl_->cma_note; }
std::uint64_t Team::attached_bytes() const { return impl_->engine->attached_bytes(); }
bool Team::oversubscribed() const { return impl_->oversubscribed; }

Comm& Team::comm(int thread) {
  impl_->check_thread(thread);
  return impl_->comms[static_cast<std::size_t>(thread)];
}

}  // namespace copse::mpi
