#pragma once
// The one planner (issue 16): a call key -- collective, form, algorithm,
// count, element size, operator commutativity, root, requested blocks,
// arrival -- and a planning context (the nodes, their hierarchies, the cost
// model) give one compiled plan: the form chosen, the algorithm, the shape
// with its block count, and the schedule. The thread Comm (runtime/comm.hpp),
// the MPI Comm (runtime/mpi_comm.hpp) and the emulator (tools/experiment.hpp)
// all plan through it, so what the emulator ranks first is what a Comm runs.
//
// Forms: flat (the algorithm over all ranks), leader (one node leader above
// the node's groups: plan/hierarchical.hpp, plan_hierarchical), multi-leader
// (every group leader talks off-node), lanes (node reduce-scatter, one
// inter-node collective per local rank, node gather: plan_lanes; nodes of
// equal size) and auto (whichever of those the simulator finds fastest).
//
// Rules, the same for every caller:
//  - Blocks: the requested count, else the count that minimises the
//    simulated time of the schedule actually run (resolve_blocks on the
//    form's composition). Costs about 20 simulations of that schedule per
//    new call shape (golden-section search, plan/autotune.cpp): at
//    p = 4096, 1 MiB, `copse sim --algorithm rabenseifner` (the same tuning)
//    takes 0.05 s on this project's 2-core test machine, so a first call
//    plans in well under a second. Non-pipelined algorithms and barriers
//    cost none.
//  - Algorithm "auto": the selection (plan/selection.hpp) among the
//    algorithms the form composes -- the same simulation as `copse sim
//    --algorithm auto`. Form auto: every form (with the selection when the
//    algorithm is auto), the fastest simulated time winning, ties to the
//    earlier form (flat, leader, multi-leader, lanes); a form whose planning
//    throws UsageError (lanes on unequal nodes, a tree-only composition) is
//    skipped. That costs one selection per form: about 4 x 8 x 20
//    simulations for auto x auto, once per call shape.
//  - One node (issue 8): when the name is the runtime's default (or auto)
//    and the form is leader, the flat selection replaces the phased plan
//    (recursive doubling for small vectors, ring or Rabenseifner for large
//    ones) -- the Comms' behaviour before forms existed.
//  - Flat only (issue 19): a collective none of whose algorithms takes
//    another form (has_hierarchy: scatter, gather, alltoall) plans flat in
//    every form, the runtime's default read as the selection.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/cost_model.hpp"
#include "common/rank_map.hpp"
#include "common/schedule.hpp"
#include "plan/arrival_monitor.hpp"
#include "plan/selection.hpp"
#include "topology/plan.hpp"

namespace copse {

// Form, to_string(Form) and parse_form are the registry's
// (algorithms/registry.hpp): an algorithm's row says which forms it takes.
// The forms auto chooses among, in tie-break order.
const std::vector<Form>& concrete_forms();

// The runtime's defaults, written once: PlanOptions below and the
// configuration's Options (config/config.hpp) both start from these.
namespace team_defaults {
inline constexpr std::string_view allreduce = "dual-root";
inline constexpr std::string_view reduce = "binary-tree";
inline constexpr std::string_view bcast = "binary-tree";
inline constexpr std::string_view barrier = "dual-root";
inline constexpr std::string_view allgather = "binary-tree";
inline constexpr std::string_view reduce_scatter = "binary-tree";
// Flat schedules only (has_hierarchy): the default is read as the selection.
inline constexpr std::string_view scatter = "binomial";
inline constexpr std::string_view gather = "binomial";
inline constexpr std::string_view alltoall = "pairwise";
}  // namespace team_defaults

// The team's default algorithm for `c`.
const std::string& default_algorithm_name(Collective c);

// The algorithm `options` name for collective `c` as written (any options
// type with the nine members allreduce ... alltoall).
template <class Options>
const std::string& configured_name(const Options& options, Collective c) {
  switch (c) {
    case Collective::allreduce: return options.allreduce;
    case Collective::reduce: return options.reduce;
    case Collective::bcast: return options.bcast;
    case Collective::barrier: return options.barrier;
    case Collective::allgather: return options.allgather;
    case Collective::reduce_scatter: return options.reduce_scatter;
    case Collective::scatter: return options.scatter;
    case Collective::gather: return options.gather;
    case Collective::alltoall: break;
  }
  return options.alltoall;
}
// The same, "auto" read as the team's default (which on one node is itself
// the selection's).
template <class Options>
const std::string& algorithm_name(const Options& options, Collective c) {
  const std::string& name = configured_name(options, c);
  return name == kSelectAlgorithm ? default_algorithm_name(c) : name;
}

struct CallKey;

// What a runtime is told about planning: the same for the thread Team
// (TeamOptions) and the MPI Team (mpi::CommOptions).
struct PlanOptions {
  // Algorithms per collective: registry names, or "auto" (the selection).
  std::string allreduce{team_defaults::allreduce};
  std::string reduce{team_defaults::reduce};
  std::string bcast{team_defaults::bcast};
  std::string barrier{team_defaults::barrier};      // a one-element allreduce of zero-byte elements
  std::string allgather{team_defaults::allgather};  // hierarchical: a tree algorithm (binomial, binary-tree)
  std::string reduce_scatter{team_defaults::reduce_scatter};
  std::string scatter{team_defaults::scatter};
  std::string gather{team_defaults::gather};
  std::string alltoall{team_defaults::alltoall};
  int blocks = 0;     // 0: the count that minimises simulated time, per call shape
  CostModel model;    // what plans are simulated (and block counts tuned) under
  Grouping grouping;  // default: auto, groups of at most 4
  Form form = Form::leader;
  // Deprecated (use form = multi_leader): with form leader, means multi-leader.
  bool multi_leader = false;

  const std::string& algorithm(Collective c) const;  // as written (may be "auto")
  Form form_in_effect() const { return form == Form::leader && multi_leader ? Form::multi_leader : form; }
  // Whether the algorithm of `c` is left to copse (the default, or auto) in
  // the default form: where a runtime's own fast paths (the direct reduce
  // of one node) may serve instead of any schedule.
  bool leaves_choice(Collective c) const;
  // The key of a call as these options plan it (CallKey below); `warmup`:
  // the default allreduce an arrival-aware one runs during its warm-up.
  CallKey call_key(Collective c, std::uint64_t count, std::size_t element_bytes, bool commutative, int root,
                   bool warmup = false) const;
  // UsageError for an unknown algorithm name, or one the leader forms cannot
  // run when the form is one of them.
  void check() const;
};

struct CallKey {
  Collective collective = Collective::allreduce;
  Form form = Form::leader;
  // A registry name, or "auto"; the text must outlive the key (a runtime's
  // options, or the registry's names) so that building a key allocates nothing.
  std::string_view algorithm = kSelectAlgorithm;
  // The name is the runtime's default rather than the user's: on one node,
  // in form leader, the flat selection replaces it (see above).
  bool runtime_default = false;
  std::uint64_t count = 0;  // elements per rank, as the collective counts them
  std::size_t element_bytes = 1;
  bool commutative = true;  // the operator's (true for collectives without one)
  int root = 0;
  int blocks = 0;  // requested; 0: chosen
  // Planned from these predicted arrivals (slt, prr; plan/arrival_monitor.hpp).
  std::optional<ArrivalKey> arrival;
  // Otherwise the hints the schedule is planned with (null: the model's).
  std::shared_ptr<const PlanHints> hints;

  // Equal keys give equal plans (hints count by their arrival key only).
  bool same_call(const CallKey& other) const;
  // The same but for the arrival key: the shape whose keyed plans are bounded.
  bool same_shape(const CallKey& other) const;
};

// What a caller may choose for its calls beyond its options
// (Comm::set_form, Comm::set_blocks; a decision-table row's `hierarchy` and
// `blocks`): none and 0 keep the configured form and block count.
struct CallChoice {
  std::optional<Form> form;
  int blocks = 0;
};

struct CompiledPlan {
  Form form = Form::flat;  // never automatic
  const AlgorithmInfo* algorithm = nullptr;
  Shape shape;  // with the block count
  SchedulePlan plan;
};

// Where plans are made: the nodes and how to make their hierarchies.
struct PlanContext {
  RankMap layout;  // ranks in node order (node-by-node numbering)
  CostModel model;
  std::vector<Picos> start;  // each rank's arrival the simulation assumes (empty: all at 0)
  // The hierarchies: given (the MPI Team plans them from bindings at set-up),
  // or made on first use from node_specs() with `grouping`.
  std::shared_ptr<const HierarchyPlan> leader, multi_leader;
  std::function<std::vector<NodeSpec>()> node_specs;
  Grouping grouping;
};

// Thread-safe; copies share their lazily made hierarchies.
class Planner {
 public:
  Planner() = default;
  explicit Planner(PlanContext context);

  // The ONE planning function. UsageError for a key no form can plan.
  CompiledPlan plan(const CallKey& key) const;

  int ranks() const;
  const RankMap& layout() const;
  SimulationOptions simulation(std::size_t element_bytes) const;
  // `algorithm` composed in `form` (not automatic) for `shape`; UsageError
  // when the form cannot take it (or has no hierarchy here).
  SchedulePlan compose(Form form, const AlgorithmInfo& algorithm, const Shape& shape) const;
  // The hierarchy `form` plans with (lanes: the leader one); null for flat.
  std::shared_ptr<const HierarchyPlan> hierarchy(Form form) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  CompiledPlan plan_form(Form form, const CallKey& key) const;
};

}  // namespace copse
