#pragma once
// The simulator's run of a ShiftPlan (algorithms/shift_plan.hpp says when it
// is exact); simulate() calls it only then.

#include "algorithms/shift_plan.hpp"
#include "algorithms/simulator.hpp"

namespace copse {

SimulationResult simulate_shift(const ShiftPlan& plan, int ranks, const SimulationOptions& options);

}  // namespace copse
