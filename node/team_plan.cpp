#include "node/team_plan.hpp"

#include <algorithm>

#include "internode/autotune.hpp"
#include "internode/simulator.hpp"
#include "node/comm.hpp"

namespace copse {

const std::string& default_algorithm_name(Collective c) {
  static const std::string allreduce(team_defaults::allreduce), reduce(team_defaults::reduce),
      bcast(team_defaults::bcast), barrier(team_defaults::barrier), allgather(team_defaults::allgather),
      reduce_scatter(team_defaults::reduce_scatter);
  switch (c) {
    case Collective::allreduce: return allreduce;
    case Collective::reduce: return reduce;
    case Collective::bcast: return bcast;
    case Collective::barrier: return barrier;
    case Collective::allgather: return allgather;
    case Collective::reduce_scatter: return reduce_scatter;
  }
  return allreduce;
}

const AlgorithmInfo* one_node_choice(Collective c, const RankMap& layout, std::uint64_t count,
                                     std::size_t element_bytes, std::string_view configured, bool commutative,
                                     const CostModel& model) {
  if (layout.nodes() != 1) return nullptr;
  if (configured != kSelectAlgorithm && configured != default_algorithm_name(c)) return nullptr;
  SimulationOptions sim;
  sim.model = model;
  sim.layout = layout;
  sim.element_bytes = std::max<std::size_t>(element_bytes, 1);
  return select_algorithm(c, Shape{layout.ranks(), count}, sim, commutative).chosen.algorithm;
}

int team_blocks(const AlgorithmInfo& inter, const Shape& shape, int requested, const CostModel& model,
                const RankMap& nodes, std::size_t element_bytes) {
  if (requested > 0) return requested;
  if (!inter.pipelined || inter.collective == Collective::barrier) return 1;
  SimulationOptions sim;
  sim.model = model;
  sim.layout = nodes;
  sim.element_bytes = std::max<std::size_t>(element_bytes, 1);
  return best_blocks(inter, shape, sim);
}

}  // namespace copse
