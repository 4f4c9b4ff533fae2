#pragma once
// The communication graph of a schedule: who sends to whom, in which steps,
// which blocks, and which part of the vector -- read from the schedule itself
// (any registered algorithm, a schedule file, a hierarchy), so no algorithm
// needs drawing code of its own. `copse tree --dot` writes it as Graphviz.
//
// Parts: an algorithm that cuts its vector into parts pipelined separately
// (AlgorithmInfo::pipelined_parts; two-tree's halves, one per tree) has each
// part's edges drawn in a colour of their own, so two-tree shows both trees.
// Blocks are counted within a part (BlockPartition of the part, `blocks`).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

struct CommEdge {
  int from = 0, to = 0;              // sender, receiver
  int part = 0;                      // the part of the vector the messages carry (0 when the algorithm has one)
  std::vector<std::uint64_t> steps;  // the sender's step of each message, ascending
  std::vector<long> blocks;          // the block of each message within its part; -1: not one block
  std::uint64_t elements = 0;        // summed over the messages
};

struct CommGraph {
  int ranks = 0;
  int parts = 1;
  std::vector<CommEdge> edges;  // by (from, to, part)
};

// Runs every rank's schedule of `plan` (planned for `shape`) and collects its
// messages. `parts`: AlgorithmInfo::pipelined_parts. ScheduleError for a peer
// out of range.
CommGraph communication_graph(const SchedulePlan& plan, const Shape& shape, int parts);

struct DotOptions {
  std::string title;
  int root = -1;             // drawn as a double circle (reduce, bcast); -1: none
  std::vector<int> node_of;  // each rank's node: ranks of one node in a box; empty: none
};
// Graphviz dot. A pair of ranks exchanging messages both ways in one part is
// one edge with arrows at both ends; edges point away from the rank the part's
// data converge on (the root, or the rank most messages flow into first), so
// trees are drawn root at the top. Labels: "s" and the sender's steps, "b" and
// the blocks ("a->b" and "b->a" when both ways differ), colour by part.
void write_dot(std::ostream& out, const CommGraph& graph, const DotOptions& options);

// "0-3,7,9-10": ascending numbers as ranges.
std::string ranges_text(const std::vector<long>& values);

}  // namespace copse
