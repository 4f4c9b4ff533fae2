#pragma once
// The algorithm registry: every schedule builder by collective and name, with
// the one-line description that `copse algorithms`, help texts and logs share.

#include <span>
#include <string>
#include <string_view>

#include "common/schedule.hpp"
#include "topology/trees.hpp"

namespace copse {

// How an algorithm built on a tree joins a hierarchy (plan/hierarchical.hpp):
// its tree is laid over the off-node ranks, every intranode group hung under
// its leader, and the collective runs once over the combined tree. An
// allreduce then either reduces up and broadcasts down (reduce_then_bcast) or
// runs Träff's doubly pipelined allreduce over it (doubly_pipelined); the
// other collectives always use the tree plainly.
enum class TreeUse { reduce_then_bcast, doubly_pipelined };
struct TreeTrait {
  trees::Node (*of)(int p, int rank) = nullptr;  // the tree over ranks 0..p-1; null: not built on a tree
  bool dual_roots = false;                       // two roots, each other's partner (trees::dual_root)
  TreeUse use = TreeUse::reduce_then_bcast;
  explicit operator bool() const { return of != nullptr; }
};

// The forms a collective takes over the nodes: `flat`, the algorithm over
// all ranks alone; `leader`, among the node leaders above each node's groups
// (plan_hierarchical); `multi_leader`, among every group leader
// (plan_hierarchical over a multi-leader hierarchy); `lanes`, as the
// inter-node algorithm of each lane (plan_lanes); `automatic`, whichever of
// those the planner (plan/planner.hpp) simulates fastest.
enum class Form { flat, leader, multi_leader, lanes, automatic };
// "flat", "leader", "multi-leader", "lanes", "auto".
std::string_view to_string(Form form);
// The inverse; UsageError naming the choices for anything else.
Form parse_form(std::string_view text);

// The forms an algorithm's row allows. `hierarchy` covers both leader forms.
// A row may opt out of a form; whether it can take it at all also depends on
// its tree trait (takes_form).
struct Forms {
  bool flat = true;
  bool hierarchy = true;
  bool lanes = true;
};

struct AlgorithmInfo {
  Collective collective;
  std::string_view name;
  std::string_view description;
  bool needs_commutative;  // refuses non-commutative operators
  bool pipelined;          // honours Shape::blocks (others run unsegmented)
  SchedulePlan (*plan)(const Shape&);
  int pipelined_parts = 1;  // the vector is cut into this many parts, each pipelined in blocks
  // What the builder plans from besides the problem (PlanHints,
  // common/schedule.hpp): explicit segment sizes (unequal segmentation), and
  // the ranks' predicted arrival times.
  bool explicit_segments = false;
  bool arrival_aware = false;
  // The tree the algorithm is built on, if any: what lets it compose with a
  // hierarchy as one tree, and serve every collective hierarchically.
  TreeTrait tree = {};
  Forms forms = {};
  // Takes blocks of unequal sizes (Shape::counts: allgatherv, gatherv,
  // scatterv, alltoallv, reduce_scatter with counts; issue 19).
  bool unequal_counts = false;
};

// Whether `algorithm` can be planned in `form`: its row allows the form, and
// for the hierarchical form of a collective other than allreduce and barrier
// (which also run as three phases around any algorithm) it has a tree.
bool takes_form(const AlgorithmInfo& algorithm, Form form);
// Throws UsageError naming the algorithm and the form when it cannot take it.
void check_form(const AlgorithmInfo& algorithm, Form form);
// Whether some registered algorithm of `collective` takes a form other than
// flat. The data-movement collectives' do not (issue 19: flat schedules so
// far), so the planner plans them flat whatever form is asked for.
bool has_hierarchy(Collective collective);

// Elements of the vector a rank's schedule works on.
std::uint64_t vector_elements(Collective collective, const Shape& shape);

std::span<const AlgorithmInfo> algorithms();
// Throws UsageError naming the known algorithms for that collective. A name
// "file:PATH" loads, proves and registers a schedule file
// (algorithms/schedule_file.hpp, file_algorithm).
const AlgorithmInfo& find_algorithm(Collective collective, std::string_view name);

// Whether the collective's vector is p blocks, one per rank (allgather,
// reduce_scatter, scatter, gather, alltoall): the collectives Shape::counts applies to.
bool has_blocks(Collective collective);

// Whether the collective has a root (reduce, bcast, scatter, gather).
bool takes_root(Collective collective);

// Checks a shape against an algorithm: ranks >= 1, blocks >= 1, root in
// range; Shape::counts only for a row that takes them, p of them (alltoall:
// p * p). Throws UsageError with one clear sentence.
void validate_shape(const AlgorithmInfo& algorithm, const Shape& shape);

// Throws UsageError when the algorithm needs a commutative operator and
// `op_name` is not one.
void check_operator(const AlgorithmInfo& algorithm, std::string_view op_name, bool commutative);

// The block count a planned shape really uses: 1 for algorithms that do not
// pipeline; otherwise the blocks of one pipelined part, which never exceed its
// element count (two-tree pipelines each half separately).
int blocks_used(const AlgorithmInfo& algorithm, const Shape& shape);

}  // namespace copse
