#include "node/team_plan.hpp"

#include <algorithm>

#include "internode/autotune.hpp"
#include "internode/simulator.hpp"

namespace copse {

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
