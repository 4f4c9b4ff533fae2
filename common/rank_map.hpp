#pragma once
// Where every copse rank lives: its node, its process, its thread within that
// process, and -- in an MPI run -- its process's rank in the MPI
// communicator. One map serves every engine: the simulator and the emulator
// read the link level of a pair from it (same node or not), the step
// executor chooses a link per transfer from it (same process: in-process;
// same node: the shared segment; otherwise MPI), and error messages name
// nodes and processes with it.
//
// Ranks are 0 .. ranks()-1. Unless placed otherwise, every rank is a thread
// of one process (process 0, thread = rank): the emulator and the thread
// Team, whose nodes are only what the cost model and the hierarchy say. A
// layout of k consecutive ranks per node keeps no per-rank tables, so the
// simulator's million-rank runs pay nothing for the map. Example, two nodes of 3 and 2
// ranks: from_node_sizes({3, 2}) puts ranks 0-2 on node 0, ranks 3-4 on node
// 1; level(2, 3) == 1, level(3, 4) == 0.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace copse {

class RankMap {
 public:
  struct Place {
    int node = 0;
    int process = 0;    // global process index
    int thread = 0;     // index of the rank among its process's ranks
    int mpi_rank = -1;  // the process's rank in the MPI communicator; -1: not an MPI run
    bool operator==(const Place&) const = default;
  };

  RankMap() = default;  // one rank on one node
  // `ranks` ranks, `ranks_per_node` consecutive ones per node (0: every rank
  // on a node of its own). UsageError for ranks < 1 or ranks_per_node < 0.
  static RankMap uniform(int ranks, int ranks_per_node);
  // Consecutive nodes holding sizes[i] ranks each (UsageError for an empty
  // list or a node without ranks).
  static RankMap from_node_sizes(std::span<const int> sizes);
  // Each rank's node, any numbering (nodes are renumbered 0.. in order of
  // first appearance).
  static RankMap from_nodes(std::span<const int> node_of);
  // Every rank's place (an MPI run). UsageError if two ranks share a
  // (process, thread), a process spans two nodes or has two MPI ranks.
  static RankMap from_places(std::vector<Place> places);

  int ranks() const { return ranks_; }
  int nodes() const { return nodes_; }
  int node(int rank) const;
  int process(int rank) const;
  int thread(int rank) const;
  int mpi_rank(int rank) const;
  Place place(int rank) const { return {node(rank), process(rank), thread(rank), mpi_rank(rank)}; }
  bool same_node(int a, int b) const { return node(a) == node(b); }
  bool same_process(int a, int b) const { return process(a) == process(b); }
  // Whether a and b reach each other through memory (one process, or one
  // node's shared segment) rather than over the network.
  bool shares_memory(int a, int b) const { return same_process(a, b) || same_node(a, b); }
  // The cost model's link level between two ranks: 0 same node, 1 other node.
  int level(int a, int b) const { return same_node(a, b) ? 0 : 1; }
  // Each rank's node, as a table.
  std::vector<int> node_table() const;
  // Ranks per node, node 0 first.
  std::vector<int> node_sizes() const;
  // "rank 5 (node 1)"; "rank 5" when there is one node.
  std::string describe(int rank) const;

  bool operator==(const RankMap&) const = default;

 private:
  int ranks_ = 1;
  int nodes_ = 1;
  int ranks_per_node_ = 1;  // used when node_of_ is empty (0: a node per rank)
  std::vector<int> node_of_;
  // Empty unless placed by from_places: process 0, thread = rank, MPI rank -1.
  std::vector<int> process_of_;
  std::vector<int> thread_of_;
  std::vector<int> mpi_rank_of_;
};

}  // namespace copse
