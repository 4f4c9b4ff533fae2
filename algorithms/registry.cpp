#include "algorithms/registry.hpp"

#include <array>
#include <string>

#include "algorithms/block_layout.hpp"
#include "algorithms/schedule_file.hpp"
#include "common/error.hpp"

namespace copse {

namespace builders {
SchedulePlan binomial_allreduce(const Shape&);
SchedulePlan binomial_reduce(const Shape&);
SchedulePlan binomial_bcast(const Shape&);
SchedulePlan chain_allreduce(const Shape&);
SchedulePlan chain_reduce(const Shape&);
SchedulePlan chain_bcast(const Shape&);
SchedulePlan binary_tree_allreduce(const Shape&);
SchedulePlan binary_tree_reduce(const Shape&);
SchedulePlan binary_tree_bcast(const Shape&);
SchedulePlan dual_root_allreduce(const Shape&);
SchedulePlan two_tree_allreduce(const Shape&);
SchedulePlan ring_allreduce(const Shape&);
SchedulePlan rabenseifner_allreduce(const Shape&);
SchedulePlan recursive_doubling_allreduce(const Shape&);
SchedulePlan rabenseifner_reduce(const Shape&);
SchedulePlan flat_allreduce(const Shape&);
SchedulePlan flat_reduce(const Shape&);
SchedulePlan flat_bcast(const Shape&);
SchedulePlan binomial_allgather(const Shape&);
SchedulePlan binary_tree_allgather(const Shape&);
SchedulePlan ring_allgather(const Shape&);
SchedulePlan binomial_reduce_scatter(const Shape&);
SchedulePlan binary_tree_reduce_scatter(const Shape&);
SchedulePlan ring_reduce_scatter(const Shape&);
SchedulePlan binomial_barrier(const Shape&);
SchedulePlan dual_root_barrier(const Shape&);
SchedulePlan recursive_doubling_barrier(const Shape&);
SchedulePlan uni_greedy_reduce(const Shape&);
SchedulePlan bi_greedy_reduce(const Shape&);
SchedulePlan bi_greedy_allreduce(const Shape&);
SchedulePlan slt_allreduce(const Shape&);
SchedulePlan prr_allreduce(const Shape&);
SchedulePlan scatter_allgather_bcast(const Shape&);
SchedulePlan bruck_allgather(const Shape&);
SchedulePlan recursive_doubling_allgather(const Shape&);
SchedulePlan recursive_halving_reduce_scatter(const Shape&);
SchedulePlan pairwise_reduce_scatter(const Shape&);
SchedulePlan binomial_scatter(const Shape&);
SchedulePlan binomial_gather(const Shape&);
SchedulePlan flat_scatter(const Shape&);
SchedulePlan flat_gather(const Shape&);
SchedulePlan pairwise_alltoall(const Shape&);
SchedulePlan bruck_alltoall(const Shape&);
}  // namespace builders

namespace {

using C = Collective;
namespace a = builders;

trees::Node dual_root_tree(int p, int rank) { return trees::dual_root(p, rank).node; }

// The trees the tree-based algorithm files build on. A use other than
// reduce_then_bcast matters to an allreduce (and a barrier, its one-element
// case) only: the other collectives use a tree plainly.
constexpr TreeTrait kBinomial{trees::binomial};
constexpr TreeTrait kFlat{trees::flat};
constexpr TreeTrait kBinary{trees::post_order_binary};
constexpr TreeTrait kChain{trees::chain, false, TreeUse::doubly_pipelined};
constexpr TreeTrait kDualRoot{dual_root_tree, true, TreeUse::doubly_pipelined};

// A row built on `tree`.
constexpr AlgorithmInfo on(TreeTrait tree, AlgorithmInfo row) {
  row.tree = tree;
  return row;
}

// The data-movement collectives (issue 19) have flat schedules only so far:
// neither a hierarchy nor lanes compose them yet.
constexpr AlgorithmInfo flat_only(AlgorithmInfo row) {
  row.forms = Forms{true, false, false};
  return row;
}

// A row whose builder takes blocks of unequal sizes (Shape::counts).
constexpr AlgorithmInfo v(AlgorithmInfo row) {
  row.unequal_counts = true;
  return row;
}

// {collective, name, description, needs commutativity, pipelined, builder}, on(tree, ...) for tree-based rows
// clang-format off: one algorithm a line, so the table reads as a table.
constexpr std::array kAlgorithms = {
    on(kBinomial, AlgorithmInfo{C::allreduce, "binomial", "binomial-tree reduce to rank 0, then binomial broadcast",
                                false, true, a::binomial_allreduce}),
    on(kChain,
       AlgorithmInfo{C::allreduce, "chain", "doubly pipelined chain: partial blocks go up while results come back",
                     false, true, a::chain_allreduce}),
    on(kBinary,
       AlgorithmInfo{
           C::allreduce, "binary-tree",
           "pipelined reduce then pipelined broadcast over one post-order binary tree (Traff's User-Allreduce1)", false,
           true, a::binary_tree_allreduce}),
    on(kDualRoot,
       AlgorithmInfo{
           C::allreduce, "dual-root",
           "doubly pipelined dual-root binary trees, three bidirectional steps per block (Traff 2021, Alg. 1)", false,
           true, a::dual_root_allreduce}),
    AlgorithmInfo{
        C::allreduce, "two-tree",
        "two binary trees each reducing and broadcasting half, edge-coloured to alternate (Sanders, Speck, Traff)",
        false, true, a::two_tree_allreduce, 2},
    AlgorithmInfo{C::allreduce, "ring", "ring reduce-scatter then ring allgather, p-1 steps each", true, false,
                  a::ring_allreduce},
    AlgorithmInfo{C::allreduce, "rabenseifner",
                  "recursive-halving reduce-scatter then recursive-doubling allgather, any p", false, false,
                  a::rabenseifner_allreduce},
    AlgorithmInfo{C::allreduce, "recursive-doubling", "whole-vector exchanges at distance 1, 2, 4, ..., any p", false,
                  false, a::recursive_doubling_allreduce},
    AlgorithmInfo{C::allreduce, "bi-greedy",
                  "Lowery-Langou's bi-greedy reduce to rank 0, then the same rounds backwards as the broadcast", true,
                  true, a::bi_greedy_allreduce},
    AlgorithmInfo{C::allreduce, "slt",
                  "Proficz's sorted linear tree: a pipelined chain in order of predicted arrival, results on "
                  "around the ring (--arrival)",
                  true, true, a::slt_allreduce, 1, false, true},
    AlgorithmInfo{C::allreduce, "prr",
                  "Proficz's pre-reduced ring: the ring in order of predicted arrival, early ranks reducing "
                  "ahead (Fig. 7; --arrival)",
                  true, true, a::prr_allreduce, 1, false, true},
    on(kFlat,
       AlgorithmInfo{C::allreduce, "flat",
                     "every rank to rank 0 in turn, then rank 0 to every rank (linear; Bjorndalen's scripted trees)",
                     false, true, a::flat_allreduce}),
    on(kFlat, AlgorithmInfo{C::reduce, "flat",
                            "every rank straight to rank 0, received in rank order (result forwarded to another root)",
                            false, true, a::flat_reduce}),
    on(kFlat, AlgorithmInfo{C::bcast, "flat", "the root straight to every rank", false, true, a::flat_bcast}),
    AlgorithmInfo{
        C::reduce, "rabenseifner",
        "recursive-halving reduce-scatter, then the segments gathered to rank 0: every rank reduces its share", false,
        false, a::rabenseifner_reduce},
    on(kBinomial, AlgorithmInfo{C::reduce, "binomial", "binomial tree to rank 0 (result forwarded to another root)",
                                false, true, a::binomial_reduce}),
    on(kBinary, AlgorithmInfo{C::reduce, "binary-tree",
                              "pipelined post-order binary tree to rank p-1 (result forwarded to another root)", false,
                              true, a::binary_tree_reduce}),
    on(kChain, AlgorithmInfo{C::reduce, "chain", "pipelined chain towards rank p-1 (result forwarded to another root)",
                             false, true, a::chain_reduce}),
    AlgorithmInfo{C::reduce, "uni-greedy",
                  "Lowery-Langou Alg. 1: the two earliest-free ranks pair up, per segment in order, timed by the cost "
                  "model (optimal for unidirectional ports)",
                  true, true, a::uni_greedy_reduce, 1, true},
    AlgorithmInfo{C::reduce, "bi-greedy",
                  "Lowery-Langou Alg. 2: ports filled round by round, smaller segments first; ceil(log2 p)+q-1 rounds",
                  true, true, a::bi_greedy_reduce},
    on(kBinomial, AlgorithmInfo{C::bcast, "binomial", "binomial tree from the root", false, true, a::binomial_bcast}),
    on(kBinary, AlgorithmInfo{C::bcast, "binary-tree", "pipelined binary tree from the root", false, true,
                              a::binary_tree_bcast}),
    on(kChain, AlgorithmInfo{C::bcast, "chain", "pipelined chain from the root", false, true, a::chain_bcast}),
    AlgorithmInfo{C::bcast, "scatter-allgather",
                  "binomial scatter of p chunks, then ring allgather (van de Geijn): ~2m per rank for large m", false,
                  false, a::scatter_allgather_bcast},
    AlgorithmInfo{C::barrier, "recursive-doubling", "one-element recursive-doubling allreduce", false, false,
                  a::recursive_doubling_barrier},
    on(kBinomial, AlgorithmInfo{C::barrier, "binomial", "one-element binomial reduce and broadcast", false, false,
                                a::binomial_barrier}),
    on(kDualRoot,
       AlgorithmInfo{C::barrier, "dual-root", "one-element dual-root allreduce", false, false, a::dual_root_barrier}),
    on(kBinomial, AlgorithmInfo{C::allgather, "binomial",
                                "gather up a binomial tree, then pipelined binomial broadcast of the whole vector",
                                false, true, a::binomial_allgather}),
    on(kBinary, AlgorithmInfo{C::allgather, "binary-tree",
                              "gather up a post-order binary tree, then pipelined broadcast of the whole vector", false,
                              true, a::binary_tree_allgather}),
    v(AlgorithmInfo{C::allgather, "ring", "p-1 steps around the ring, one block each", false, false,
                    a::ring_allgather}),
    AlgorithmInfo{C::allgather, "bruck", "Bruck's ceil(log2 p) rounds at distance 1, 2, 4, ..., any p", false, false,
                  a::bruck_allgather},
    v(AlgorithmInfo{C::allgather, "recursive-doubling",
                    "block groups doubling at distance 1, 2, 4, ... (any p, folded onto a power of two)", false, false,
                    a::recursive_doubling_allgather}),
    on(kBinomial, AlgorithmInfo{C::reduce_scatter, "binomial",
                                "pipelined binomial reduce of the whole vector, then scatter down the tree", false,
                                true, a::binomial_reduce_scatter}),
    on(kBinary, AlgorithmInfo{C::reduce_scatter, "binary-tree",
                              "pipelined post-order binary reduce of the whole vector, then scatter down the tree",
                              false, true, a::binary_tree_reduce_scatter}),
    v(AlgorithmInfo{C::reduce_scatter, "ring", "p-1 steps around the ring, each block accumulating cyclically", true,
                    false, a::ring_reduce_scatter}),
    AlgorithmInfo{C::reduce_scatter, "recursive-halving",
                  "halving at distance p/2, ..., 1 (any p, folded onto a power of two), log2 p steps", true, false,
                  a::recursive_halving_reduce_scatter},
    v(AlgorithmInfo{C::reduce_scatter, "pairwise", "p-1 direct exchanges, each rank's block straight to its owner",
                    true, false, a::pairwise_reduce_scatter}),
    v(flat_only(AlgorithmInfo{C::scatter, "binomial",
                              "the root's rank range halved ceil(log2 p) times, each half sent whole to a rank in it; "
                              "any root",
                              false, false, a::binomial_scatter})),
    v(flat_only(AlgorithmInfo{C::scatter, "flat", "the root sends each rank its block in turn (linear)", false, false,
                              a::flat_scatter})),
    v(flat_only(AlgorithmInfo{C::gather, "binomial",
                              "the binomial scatter backwards: halves gathered up ceil(log2 p) levels; any root", false,
                              false, a::binomial_gather})),
    v(flat_only(AlgorithmInfo{C::gather, "flat", "each rank sends the root its block in turn (linear)", false, false,
                              a::flat_gather})),
    v(flat_only(AlgorithmInfo{C::alltoall, "pairwise",
                              "p-1 exchanges, the block for rank r+s straight to it in step s (large blocks)", false,
                              false, a::pairwise_alltoall})),
    flat_only(AlgorithmInfo{C::alltoall, "bruck",
                            "Bruck's index algorithm: ceil(log2 p) rounds of about half the blocks (small blocks)",
                            false, false, a::bruck_alltoall}),
};
// clang-format on

}  // namespace

std::span<const AlgorithmInfo> algorithms() { return kAlgorithms; }

std::string_view to_string(Form form) {
  switch (form) {
    case Form::flat: return "flat";
    case Form::leader: return "leader";
    case Form::multi_leader: return "multi-leader";
    case Form::lanes: return "lanes";
    case Form::automatic: return "auto";
  }
  return "?";
}

Form parse_form(std::string_view text) {
  for (Form f : {Form::flat, Form::leader, Form::multi_leader, Form::lanes, Form::automatic})
    if (text == to_string(f)) return f;
  throw UsageError("unknown hierarchy form \"" + std::string(text) +
                   "\" (expected flat, leader, multi-leader, lanes or auto)");
}

bool takes_form(const AlgorithmInfo& algorithm, Form form) {
  switch (form) {
    case Form::flat: return algorithm.forms.flat;
    case Form::leader:
    case Form::multi_leader:
      // Allreduce (and barrier, a one-element allreduce) also run as three
      // phases around any algorithm; the other collectives need the tree.
      return algorithm.forms.hierarchy &&
             (algorithm.tree || algorithm.collective == C::allreduce || algorithm.collective == C::barrier);
    case Form::lanes: return algorithm.forms.lanes;
    case Form::automatic:
      return takes_form(algorithm, Form::flat) || takes_form(algorithm, Form::leader) ||
             takes_form(algorithm, Form::lanes);
  }
  return false;
}

void check_form(const AlgorithmInfo& algorithm, Form form) {
  if (takes_form(algorithm, form)) return;
  const bool needs_tree = (form == Form::leader || form == Form::multi_leader) && algorithm.forms.hierarchy;
  throw UsageError(std::string(to_string(algorithm.collective)) + " algorithm '" + std::string(algorithm.name) +
                   "' does not run in the " + std::string(to_string(form)) + " form" +
                   (needs_tree ? ": a hierarchical " + std::string(to_string(algorithm.collective)) +
                                     " needs an algorithm built on a tree"
                               : ""));
}

bool has_hierarchy(Collective collective) {
  for (const AlgorithmInfo& a : kAlgorithms)
    if (a.collective == collective && (takes_form(a, Form::leader) || takes_form(a, Form::lanes))) return true;
  return false;
}

std::uint64_t vector_elements(Collective collective, const Shape& shape) {
  if (shape.counts) {  // unequal blocks, packed (algorithms/block_layout.hpp)
    if (collective == C::alltoall) return AlltoallLayout::elements(shape);
    if (has_blocks(collective)) return BlockLayout(shape).total();
  }
  switch (collective) {
    case C::allgather:
    case C::reduce_scatter:
    case C::scatter:
    case C::gather: return shape.count * static_cast<std::uint64_t>(shape.ranks);
    case C::alltoall: return 2 * shape.count * static_cast<std::uint64_t>(shape.ranks);  // send area, receive area
    case C::barrier: return 1;
    default: return shape.count;
  }
}

const AlgorithmInfo& find_algorithm(Collective collective, std::string_view name) {
  if (name.starts_with(kScheduleFilePrefix)) return file_algorithm(collective, name.substr(kScheduleFilePrefix.size()));
  std::string known;
  for (const auto& a : kAlgorithms) {
    if (a.collective != collective) continue;
    if (a.name == name) return a;
    known += (known.empty() ? "" : ", ") + std::string(a.name);
  }
  throw UsageError("unknown " + std::string(to_string(collective)) + " algorithm '" + std::string(name) +
                   "' (known: " + known + "; or file:PATH, a schedule file)");
}

bool takes_root(Collective collective) {
  return collective == C::reduce || collective == C::bcast || collective == C::scatter || collective == C::gather;
}

void validate_shape(const AlgorithmInfo& algorithm, const Shape& shape) {
  if (shape.ranks < 1) throw UsageError("the rank count must be at least 1, got " + std::to_string(shape.ranks));
  if (shape.blocks < 1) throw UsageError("the block count must be at least 1, got " + std::to_string(shape.blocks));
  if (takes_root(algorithm.collective) && (shape.root < 0 || shape.root >= shape.ranks))
    throw UsageError("root " + std::to_string(shape.root) + " is not a rank in [0, " + std::to_string(shape.ranks) +
                     ")");
  if (!shape.counts) return;
  const std::string what =
      std::string(to_string(algorithm.collective)) + " algorithm '" + std::string(algorithm.name) + "'";
  if (!algorithm.unequal_counts) throw UsageError(what + " does not take blocks of unequal sizes");
  const auto p = static_cast<std::size_t>(shape.ranks);
  const std::size_t expected = algorithm.collective == C::alltoall ? p * p : p;
  if (shape.counts->size() != expected)
    throw UsageError(what + " needs " + std::to_string(expected) + " block counts, got " +
                     std::to_string(shape.counts->size()));
}

bool has_blocks(Collective collective) {
  return collective == C::allgather || collective == C::reduce_scatter || collective == C::scatter ||
         collective == C::gather || collective == C::alltoall;
}

void check_operator(const AlgorithmInfo& algorithm, std::string_view op_name, bool commutative) {
  if (algorithm.needs_commutative && !commutative)
    throw UsageError(std::string(to_string(algorithm.collective)) + " algorithm '" + std::string(algorithm.name) +
                     "' needs a commutative operator, and '" + std::string(op_name) + "' is not commutative");
}

int blocks_used(const AlgorithmInfo& algorithm, const Shape& shape) {
  if (!algorithm.pipelined) return 1;
  const auto parts = static_cast<std::uint64_t>(algorithm.pipelined_parts);
  return BlockPartition((vector_elements(algorithm.collective, shape) + parts - 1) / parts, shape.blocks).blocks;
}

}  // namespace copse
