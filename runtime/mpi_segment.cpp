#include <unistd.h>

#include <cstdio>

#include "common/error.hpp"
#include "common/text.hpp"
#include "runtime/mpi_team_state.hpp"

namespace copse::mpi {

namespace {

// Every process learns whether all set-up steps so far succeeded everywhere;
// a process that failed rethrows its own error, the others say that another
// failed (its own message is on its stderr or in its exception).
void agree(MPI_Comm comm, std::exception_ptr local) {
  int ok = local ? 0 : 1, all = 0;
  check_mpi(PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce (copse set-up)");
  if (local) std::rethrow_exception(local);
  if (!all) throw SystemError("another process of the communicator failed to set up copse (its error says why)");
}

}  // namespace

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

}  // namespace copse::mpi
