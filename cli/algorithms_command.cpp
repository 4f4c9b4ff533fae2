// copse algorithms: every registered algorithm, as a table or JSON; with
// --selection, the algorithm the selection (plan/selection.hpp) chooses
// per collective, size and shape under the configured cost model.

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/registry.hpp"
#include "cli/cluster_options.hpp"
#include "cli/options.hpp"
#include "common/units.hpp"
#include "plan/selection.hpp"
#include "transport/direct_reduce.hpp"

namespace copse {
namespace {

std::size_t collective_width() {
  std::size_t width = 10;  // "COLLECTIVE"
  for (Collective c : all_collectives()) width = std::max(width, to_string(c).size());
  return width + 2;
}

// A tree trait as the table shows it: "-" (no tree), "tree", "tree,
// doubly pipelined", "tree, doubly pipelined, dual roots".
std::string tree_description(const TreeTrait& tree) {
  if (!tree) return "-";
  return std::string("tree") + (tree.use == TreeUse::doubly_pipelined ? ", doubly pipelined" : "") +
         (tree.dual_roots ? ", dual roots" : "");
}

// The tree trait in --json: null, or how a hierarchy uses the tree.
Json tree_json(const TreeTrait& tree) {
  if (!tree) return nullptr;
  return {{"use", tree.use == TreeUse::doubly_pipelined ? "doubly_pipelined" : "reduce_then_bcast"},
          {"dual_roots", tree.dual_roots}};
}

// The forms the algorithm takes (takes_form), e.g. flat, leader, multi-leader, lanes.
std::vector<std::string_view> forms_of(const AlgorithmInfo& a) {
  std::vector<std::string_view> out;
  for (Form f : {Form::flat, Form::leader, Form::multi_leader, Form::lanes})
    if (takes_form(a, f)) out.push_back(to_string(f));
  return out;
}

std::string forms_text(const AlgorithmInfo& a) {
  std::string out;
  for (std::string_view f : forms_of(a)) out += (out.empty() ? "" : ",") + std::string(f);
  return out;
}

Json forms_json(const AlgorithmInfo& a) {
  Json forms = Json::array();
  for (std::string_view f : forms_of(a)) forms.push_back(f);
  return forms;
}

int run_algorithms(bool json) {
  if (json) {
    Json list = Json::array();
    for (const auto& a : algorithms()) {
      list.push_back({{"collective", to_string(a.collective)},
                      {"name", a.name},
                      {"description", a.description},
                      {"needs_commutative", a.needs_commutative},
                      {"pipelined", a.pipelined},
                      {"tree", tree_json(a.tree)},
                      {"forms", forms_json(a)},
                      {"unequal_counts", a.unequal_counts}});
    }
    std::cout << list.dump(2) << "\n";
    return 0;
  }
  std::size_t name_width = 4, tree_width = 6, forms_width = 7;  // "NAME", "TREE", "FORMS"
  for (const auto& a : algorithms()) {
    name_width = std::max(name_width, a.name.size());
    tree_width = std::max(tree_width, tree_description(a.tree).size() + 2);
    forms_width = std::max(forms_width, forms_text(a).size() + 2);
  }
  const std::size_t collective = collective_width();
  std::cout << pad("COLLECTIVE", collective) << pad("NAME", name_width + 2) << pad("PIPELINED", 11)
            << pad("COMMUTATIVE-ONLY", 18) << pad("TREE", tree_width) << pad("FORMS", forms_width) << pad("V", 4)
            << "DESCRIPTION\n";
  for (const auto& a : algorithms()) {
    std::cout << pad(std::string(to_string(a.collective)), collective) << pad(std::string(a.name), name_width + 2)
              << pad(a.pipelined ? "yes" : "no", 11) << pad(a.needs_commutative ? "yes" : "no", 18)
              << pad(tree_description(a.tree), tree_width) << pad(forms_text(a), forms_width)
              << pad(a.unequal_counts ? "v" : "-", 4) << a.description << "\n";
  }
  return 0;
}

// The selection table's grid: sizes per rank, and shapes (nodes x ranks per node).
struct GridShape {
  int nodes;
  int ranks_per_node;
  int ranks() const { return nodes * ranks_per_node; }
  std::string label() const {
    return nodes == 1 ? std::to_string(ranks_per_node) + " (1 node)"
                      : std::to_string(nodes) + "x" + std::to_string(ranks_per_node);
  }
};
constexpr std::uint64_t kGridSizes[] = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20};
constexpr GridShape kGridShapes[] = {{1, 2}, {1, 8}, {1, 16}, {8, 16}};

int run_selection(const CostModel& model, bool json) {
  Json rows = Json::array();
  std::vector<std::vector<std::string>> table;  // per row: collective, shape, then one name per size
  for (Collective c : all_collectives()) {
    for (const GridShape& g : kGridShapes) {
      std::vector<std::string> line{std::string(to_string(c)), g.label()};
      SimulationOptions options;
      options.model = model;
      options.layout = RankMap::uniform(g.ranks(), g.ranks_per_node);
      options.element_bytes = 1;
      for (std::uint64_t bytes : kGridSizes) {
        const Selection s = select_algorithm(c, Shape{g.ranks(), bytes}, options, true);
        line.push_back(std::string(s.chosen.algorithm->name));
        rows.push_back({{"collective", to_string(c)},
                        {"nodes", g.nodes},
                        {"ranks_per_node", g.ranks_per_node},
                        {"ranks", g.ranks()},
                        {"bytes", bytes},
                        {"algorithm", s.chosen.algorithm->name},
                        {"blocks", s.chosen.blocks},
                        {"time_ps", s.chosen.time},
                        {"steps", s.chosen.steps},
                        {"max_bytes_moved_per_rank", s.chosen.max_received}});
      }
      table.push_back(std::move(line));
    }
  }
  // Outside the simulation: what a team on one node runs instead (runtime/comm.cpp).
  const Json direct{{"collectives", {"allreduce", "barrier"}},
                    {"max_bytes", DirectReduce::kSlotBytes},
                    {"max_ranks", DirectReduce::kMaxRanks},
                    {"sliced_allreduce_from_bytes", DirectReduce::kSlicedFromBytes}};
  if (json) {
    std::cout << Json{{"model", model_summary(model)},
                      {"element_bytes", 1},
                      {"commutative", true},
                      {"selection", rows},
                      {"direct_reduce", direct}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "Selection (copse sim --algorithm auto): the fastest algorithm in simulation, pipelined ones at their "
               "best block count;\n"
            << "bytes per rank (allgather, reduce_scatter, scatter, gather, alltoall: per block), one element per "
               "byte, a commutative operator; ranks on one node, or NODESxRANKS.\n"
            << "Cost model: " << model_summary(model) << "\n\n";
  std::vector<std::size_t> width(2 + std::size(kGridSizes), 0);
  width[0] = collective_width() - 2, width[1] = 5;
  for (std::size_t i = 0; i < std::size(kGridSizes); ++i) width[i + 2] = format_bytes(kGridSizes[i]).size();
  for (const auto& line : table)
    for (std::size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  auto print = [&width](const std::vector<std::string>& line) {
    for (std::size_t i = 0; i + 1 < line.size(); ++i) std::cout << pad(line[i], width[i] + 2);
    std::cout << line.back() << "\n";
  };
  std::vector<std::string> header{"COLLECTIVE", "RANKS"};
  for (std::uint64_t bytes : kGridSizes) header.push_back(format_bytes(bytes));
  print(header);
  for (const auto& line : table) print(line);
  std::cout << "\nA team on one node without a virtual clock runs allreduce and barrier of at most "
            << format_bytes(DirectReduce::kSlotBytes) << " among at most " << DirectReduce::kMaxRanks
            << " ranks through the direct shared-memory reduce instead\n"
               "(every rank posts its vector in a slot and reduces all slots in rank order: one round), and a "
               "thread team its allreduces from "
            << format_bytes(DirectReduce::kSlicedFromBytes)
            << " in slices\n(each rank reduces its 1/T slice straight from the others' vectors, then copies the "
               "other slices); neither is a schedule, so neither is simulated.\n";
  return 0;
}

}  // namespace

void add_algorithms_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto json = std::make_shared<bool>(false);
  auto selection = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("algorithms", "list every registered algorithm");
  add_config_file_option(command);
  command->add_flag("--json", *json, "print a JSON array instead of a table");
  command->add_flag("--selection", *selection,
                    "the algorithm the selection chooses per collective, size (8 B .. 16 MiB) and shape (one node of "
                    "2, 8, 16 ranks; 8 nodes of 16) under the configured cost model (with --json: one object)");
  command->callback([json, selection, &config, &run_parsed] {
    run_parsed = [json, selection, &config] {
      return *selection ? run_selection(config.cost_model(), *json) : run_algorithms(*json);
    };
  });
}

}  // namespace copse
