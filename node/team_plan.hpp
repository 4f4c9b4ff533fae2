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
// The selection for a team whose ranks all share one node (issue 8, item 1),
// while the team runs its default algorithm for the collective (`configured`
// == the team default; a configured algorithm is obeyed):
//  - allreduce and barrier of at most kSmallVectorBytes per rank: one flat
//    recursive-doubling allreduce -- ceil(log2 T) exchanges of the whole
//    vector, in rank order -- rather than the hierarchy's phased
//    reduce-scatter and allgather, whose extra exchanges cost more than the
//    bytes they save;
//  - allgather, and reduce_scatter with a commutative operator: the flat
//    ring, every rank sending and receiving one block per step, rather than
//    gathering the whole vector at the top of a tree and sending it down.
// Returns nullptr when the hierarchy's plan stands.
inline constexpr std::uint64_t kSmallVectorBytes = 16 << 10;
const AlgorithmInfo* one_node_choice(Collective c, int nodes, std::uint64_t bytes, std::string_view configured,
                                     bool commutative);

int team_blocks(const AlgorithmInfo& inter, const Shape& shape, int requested, const CostModel& model,
                const RankMap& nodes, std::size_t element_bytes);

}  // namespace copse
