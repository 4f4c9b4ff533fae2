#include "plan/selection.hpp"

#include <string>
#include <tuple>

#include "common/error.hpp"
#include "plan/autotune.hpp"

namespace copse {

bool selectable(const AlgorithmInfo& algorithm, bool commutative) {
  if (algorithm.needs_commutative && !commutative) return false;
  if (algorithm.arrival_aware) return false;
  return algorithm.name != "flat";
}

Selection select_algorithm(Collective collective, Shape shape, const SimulationOptions& options, bool commutative,
                           const SelectionPlanner& planner) {
  if (!shape.hints) shape.hints = planning_hints(options);
  shape.blocks = 1;
  Selection selection;
  for (const AlgorithmInfo& algorithm : algorithms()) {
    if (algorithm.collective != collective || !selectable(algorithm, commutative)) continue;
    validate_shape(algorithm, shape);  // the same for every candidate: a bad shape fails here
    auto plan_for = [&](const Shape& s) { return planner ? planner(algorithm, s) : algorithm.plan(s); };
    SelectionCandidate candidate{&algorithm};
    try {
      Shape tuned = shape;
      tuned.blocks = best_blocks(plan_for, algorithm.pipelined, shape, options);
      const SimulationResult r = simulate(plan_for(tuned), tuned.ranks, options);
      candidate.blocks = tuned.blocks;
      candidate.time = r.time;
      candidate.steps = r.max_steps;
      candidate.max_received = r.max_elements_received;
    } catch (const UsageError&) {
      continue;  // the planner does not compose this algorithm
    }
    selection.candidates.push_back(candidate);
  }
  if (selection.candidates.empty())
    throw UsageError("no " + std::string(to_string(collective)) + " algorithm applies" +
                     (commutative ? "" : " to a non-commutative operator") + " here");
  // Time first; ties to fewer steps, then less traffic at the busiest rank,
  // then the registry's order (the first of equals is kept).
  auto key = [](const SelectionCandidate& c) { return std::tuple(c.time, c.steps, c.max_received); };
  selection.chosen = selection.candidates.front();
  for (const auto& c : selection.candidates)
    if (key(c) < key(selection.chosen)) selection.chosen = c;
  return selection;
}

}  // namespace copse
