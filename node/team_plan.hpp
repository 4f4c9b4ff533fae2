#pragma once
// What the thread Team (node/comm.hpp) and the MPI Team (node/mpi_comm.hpp)
// decide alike when they plan a collective: which inter-node algorithm the
// options name for it, and how many pipeline blocks it runs with.

#include <cstddef>
#include <string>

#include "common/cost_model.hpp"
#include "common/rank_map.hpp"
#include "internode/registry.hpp"

namespace copse {

// The algorithm `options` names for collective `c` (any options type with
// the six members allreduce ... reduce_scatter, e.g. TeamOptions, CommOptions).
template <class Options>
const std::string& algorithm_name(const Options& options, Collective c) {
  switch (c) {
    case Collective::allreduce: return options.allreduce;
    case Collective::reduce: return options.reduce;
    case Collective::bcast: return options.bcast;
    case Collective::barrier: return options.barrier;
    case Collective::allgather: return options.allgather;
    case Collective::reduce_scatter: return options.reduce_scatter;
  }
  return options.allreduce;
}

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
