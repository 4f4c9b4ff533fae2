#pragma once
// The hierarchy, planned per node and assembled.
//
// Every process must plan the same schedules, so every node's part of the
// hierarchy is planned once, by the node's leader on its own machine, and
// sent to everyone as integers: [ok=1, levels, per level: groups, per group:
// members, members..., offnode count, offnode..., pu_of..., level names,
// machine] with strings as a length and their characters; or [ok=0,
// message]. Private to libcopse_mpi (runtime/mpi_setup.cpp).

#include <vector>

#include "runtime/mpi_comm.hpp"
#include "topology/plan.hpp"

namespace copse::mpi {

// A one-node plan (plan.levels[0] and the rest of node 0) as integers.
std::vector<int> serialise_node_plan(const HierarchyPlan& plan);

// Appends node `node` (its ranks from `first` on, `ranks` of them) to `plan`;
// throws the leader's UsageError where it sent [ok=0, message].
void append_node_plan(HierarchyPlan& plan, int node, int first, int ranks, const int* in);

// The leader's view of its node, as integers: its machine, its ranks bound as
// the processes are (`pus`: each rank's PU, -1 where unbound), else by block
// distribution; [ok=0, message] where planning fails.
std::vector<int> plan_own_node(const CommOptions& options, const std::vector<int>& pus);

}  // namespace copse::mpi
