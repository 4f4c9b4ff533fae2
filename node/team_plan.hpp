#pragma once
// What the thread Team (node/comm.hpp) and the MPI Team (node/mpi_comm.hpp)
// decide alike when they plan a collective: which inter-node algorithm the
// options name for it, and how many pipeline blocks it runs with.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/cost_model.hpp"
#include "common/rank_map.hpp"
#include "internode/registry.hpp"
#include "internode/selection.hpp"

namespace copse {

// The team's default algorithm for `c` (team_defaults, node/comm.hpp).
const std::string& default_algorithm_name(Collective c);

// The algorithm `options` names for collective `c` (any options type with
// the six members allreduce ... reduce_scatter, e.g. TeamOptions, CommOptions).
// "auto" (kSelectAlgorithm: let copse choose) names the team's default, which
// on one node is itself the selection's (one_node_choice).
template <class Options>
const std::string& algorithm_name(const Options& options, Collective c) {
  const std::string* name = &options.allreduce;
  switch (c) {
    case Collective::allreduce: name = &options.allreduce; break;
    case Collective::reduce: name = &options.reduce; break;
    case Collective::bcast: name = &options.bcast; break;
    case Collective::barrier: name = &options.barrier; break;
    case Collective::allgather: name = &options.allgather; break;
    case Collective::reduce_scatter: name = &options.reduce_scatter; break;
  }
  return *name == kSelectAlgorithm ? default_algorithm_name(c) : *name;
}

// The selection for a team whose ranks all share one node (issue 8, item 1):
// while the team runs its default algorithm for the collective (`configured`
// is the team default, or "auto"; a configured algorithm is obeyed), the
// flat algorithm the selection (internode/selection.hpp) finds fastest for
// the team's `layout` (its rank count; one node), `count` elements of
// `element_bytes` each, the operator's commutativity and the team's cost
// model -- recursive doubling for small vectors, ring or Rabenseifner for
// large ones, trees where they win -- rather than the hierarchy's phased
// plan. Returns nullptr when the hierarchy's plan stands (more than one
// node, or a configured algorithm).
const AlgorithmInfo* one_node_choice(Collective c, const RankMap& layout, std::uint64_t count,
                                     std::size_t element_bytes, std::string_view configured, bool commutative,
                                     const CostModel& model);

// The block count a team plans `inter` with for `shape`: `requested` when it
// is positive; otherwise, for a pipelined algorithm (never a barrier),
// best_blocks of the inter-node algorithm itself, flat over all the team's
// ranks with the team's node map (`nodes`) and cost model -- the
// hierarchical schedule pipelines the same blocks through the groups, so the
// flat optimum is a fair stand-in and best_blocks stays the one autotuner;
// else 1.
int team_blocks(const AlgorithmInfo& inter, const Shape& shape, int requested, const CostModel& model,
                const RankMap& nodes, std::size_t element_bytes);

}  // namespace copse
