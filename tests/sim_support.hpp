#pragma once
// Cost models and simulated times the closed-form tests share.

#include <string_view>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"

namespace copse::testing {

// Costs whose products with small byte counts are whole picoseconds, so a
// closed form and the simulator agree exactly.
inline constexpr double kAlpha = 1e-6, kBeta = 1e-9, kGamma = 5e-10;

// One alpha-beta(-gamma) level for every link.
inline SimulationOptions uniform_model(double alpha, double beta, double gamma, Ports ports = Ports::bidirectional) {
  SimulationOptions o;
  o.model = CostModel::uniform({alpha, beta}, gamma, ports);
  return o;
}

// The simulated time, in seconds, of the registered algorithm `name` for `shape`.
inline double simulated_seconds(Collective c, std::string_view name, Shape shape, const SimulationOptions& o) {
  return to_seconds(simulate(find_algorithm(c, name).plan(shape), shape.ranks, o).time);
}

}  // namespace copse::testing
