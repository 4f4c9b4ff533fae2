#include "plan/planner.hpp"

#include <algorithm>
#include <mutex>

#include "common/error.hpp"
#include "plan/autotune.hpp"
#include "plan/hierarchical.hpp"

namespace copse {

const std::vector<Form>& concrete_forms() {
  static const std::vector<Form> forms{Form::flat, Form::leader, Form::multi_leader, Form::lanes};
  return forms;
}

const std::string& default_algorithm_name(Collective c) {
  static const PlanOptions defaults;
  return defaults.algorithm(c);
}

const std::string& PlanOptions::algorithm(Collective c) const { return configured_name(*this, c); }

bool PlanOptions::leaves_choice(Collective c) const {
  const std::string& name = algorithm(c);
  return (name == kSelectAlgorithm || name == default_algorithm_name(c)) && form_in_effect() == Form::leader;
}

CallKey PlanOptions::call_key(Collective c, std::uint64_t count, std::size_t element_bytes, bool commutative, int root,
                              bool warmup) const {
  const std::string& configured = algorithm(c);
  CallKey key;
  key.collective = c;
  key.form = form_in_effect();
  key.algorithm = warmup ? std::string_view(team_defaults::allreduce) : std::string_view(configured);
  key.runtime_default = warmup || configured == kSelectAlgorithm || configured == default_algorithm_name(c);
  key.count = count;
  key.element_bytes = element_bytes;
  key.commutative = commutative;
  key.root = root;
  key.blocks = blocks;
  return key;
}

void PlanOptions::check() const {
  // A named algorithm that cannot take a leader form fails here, before any
  // call, rather than at the first call of its collective (a flat-only
  // collective plans flat in every form: its name only has to exist).
  const Form in_effect = form_in_effect();
  for (Collective c : all_collectives())
    if (algorithm(c) != kSelectAlgorithm) {
      const AlgorithmInfo& a = find_algorithm(c, algorithm(c));
      if ((in_effect == Form::leader || in_effect == Form::multi_leader) && has_hierarchy(c)) try {
          check_form(a, in_effect);
        } catch (const UsageError& e) {
          throw UsageError(std::string(e.what()) + " (choose one that does, or hierarchy.form = flat, lanes or auto)");
        }
    }
  if (blocks < 0) throw UsageError("blocks must not be negative, got " + std::to_string(blocks));
}

bool CallKey::same_shape(const CallKey& o) const {
  return collective == o.collective && count == o.count && element_bytes == o.element_bytes && root == o.root &&
         commutative == o.commutative && form == o.form && blocks == o.blocks && runtime_default == o.runtime_default &&
         algorithm == o.algorithm;
}

bool CallKey::same_call(const CallKey& o) const { return same_shape(o) && arrival == o.arrival; }

struct Planner::State {
  PlanContext context;
  std::mutex mutex;  // guards making the hierarchies
};

Planner::Planner(PlanContext context) : state_(std::make_shared<State>()) { state_->context = std::move(context); }

int Planner::ranks() const { return state_->context.layout.ranks(); }
const RankMap& Planner::layout() const { return state_->context.layout; }

SimulationOptions Planner::simulation(std::size_t element_bytes) const {
  SimulationOptions sim;
  sim.model = state_->context.model;
  sim.layout = state_->context.layout;
  sim.element_bytes = std::max<std::size_t>(element_bytes, 1);
  sim.start = state_->context.start;
  return sim;
}

std::shared_ptr<const HierarchyPlan> Planner::hierarchy(Form form) const {
  if (form == Form::flat) return nullptr;
  PlanContext& c = state_->context;
  std::lock_guard<std::mutex> lock(state_->mutex);
  const bool multi = form == Form::multi_leader;
  auto& made = multi ? c.multi_leader : c.leader;
  if (!made && form == Form::lanes && c.multi_leader) return c.multi_leader;  // lanes use no leaders
  if (!made) {
    if (!c.node_specs)
      throw UsageError(std::string("this team has no ") + (multi ? "multi-leader" : "one-leader") +
                       " hierarchy (the form is fixed when the team is set up)");
    made = std::make_shared<const HierarchyPlan>(plan_hierarchy(c.node_specs(), c.grouping, multi));
  }
  return made;
}

SchedulePlan Planner::compose(Form form, const AlgorithmInfo& algorithm, const Shape& shape) const {
  switch (form) {
    case Form::flat: return algorithm.plan(shape);
    case Form::leader:
    case Form::multi_leader: return plan_hierarchical(hierarchy(form), algorithm, shape);
    case Form::lanes: {
      const std::vector<int> sizes = layout().node_sizes();
      for (std::size_t n = 1; n < sizes.size(); ++n)
        if (sizes[n] != sizes[0])
          throw UsageError("the lanes form needs nodes of equal size; node 0 holds " + std::to_string(sizes[0]) +
                           " ranks and node " + std::to_string(n) + " " + std::to_string(sizes[n]));
      return plan_lanes(hierarchy(form), algorithm, shape);
    }
    case Form::automatic: break;
  }
  throw UsageError("compose: form auto is not a composition");
}

// `key` in one concrete form: the algorithm named (or the selection's
// among those the form composes), at the requested or best block count.
CompiledPlan Planner::plan_form(Form form, const CallKey& key) const {
  const SimulationOptions sim = simulation(key.element_bytes);
  Shape shape{ranks(), key.count, 1, key.root, key.hints};
  // Builders that read the model (Lowery-Langou's) see the same hints from
  // every caller: the model, and the arrival predicted, if any.
  if (key.arrival || !shape.hints) {
    SimulationOptions model;
    model.model = state_->context.model;
    model.element_bytes = sim.element_bytes;
    shape.hints = planning_hints(model, key.arrival ? arrival_of(*key.arrival) : std::vector<Picos>{});
  }
  auto plan_for = [&](const AlgorithmInfo& a) {
    return [this, form, &a](const Shape& s) { return compose(form, a, s); };
  };
  const AlgorithmInfo* algorithm = nullptr;
  std::optional<int> requested;
  if (key.blocks > 0) requested = key.blocks;
  if (key.algorithm == kSelectAlgorithm) {
    const Selection chosen = select_algorithm(key.collective, shape, sim, key.commutative,
                                              [&](const AlgorithmInfo& a, const Shape& s) { return plan_for(a)(s); });
    algorithm = chosen.chosen.algorithm;
    if (!requested) requested = chosen.chosen.blocks;  // best_blocks of this very composition
  } else {
    algorithm = &find_algorithm(key.collective, key.algorithm);
  }
  check_operator(*algorithm, "the operator", key.commutative);
  shape.blocks = resolve_blocks(plan_for(*algorithm), *algorithm, shape, requested, sim);
  return CompiledPlan{form, algorithm, shape, compose(form, *algorithm, shape)};
}

CompiledPlan Planner::plan(const CallKey& key) const {
  const bool flat_only = !has_hierarchy(key.collective);
  if (key.runtime_default && !key.arrival && (flat_only || (key.form == Form::leader && layout().nodes() == 1))) {
    CallKey flat = key;
    flat.algorithm = kSelectAlgorithm;
    return plan_form(Form::flat, flat);
  }
  if (flat_only) return plan_form(Form::flat, key);
  if (key.form != Form::automatic) return plan_form(key.form, key);
  std::optional<CompiledPlan> best;
  Picos best_time = 0;
  std::string refusals;
  const SimulationOptions sim = simulation(key.element_bytes);
  for (Form form : concrete_forms()) {
    try {
      CompiledPlan candidate = plan_form(form, key);
      const Picos t = simulate(candidate.plan, ranks(), sim).time;
      if (!best || t < best_time) best = std::move(candidate), best_time = t;
    } catch (const UsageError& e) {
      refusals += std::string(refusals.empty() ? "" : "; ") + std::string(to_string(form)) + ": " + e.what();
    }
  }
  if (!best) throw UsageError("no form can plan this " + std::string(to_string(key.collective)) + ": " + refusals);
  return std::move(*best);
}

}  // namespace copse
