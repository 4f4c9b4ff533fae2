#include "runtime/mpi_hierarchy_wire.hpp"

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "topology/machine.hpp"

namespace copse::mpi {

namespace {

void put_string(std::vector<int>& out, const std::string& text) {
  out.push_back(static_cast<int>(text.size()));
  for (char ch : text) out.push_back(static_cast<unsigned char>(ch));
}

std::string get_string(const int*& in) {
  const int n = *in++;
  std::string text;
  for (int i = 0; i < n; ++i) text.push_back(static_cast<char>(*in++));
  return text;
}

}  // namespace

std::vector<int> serialise_node_plan(const HierarchyPlan& plan) {
  std::vector<int> out{1, static_cast<int>(plan.levels[0].size())};
  for (const auto& level : plan.levels[0]) {
    out.push_back(static_cast<int>(level.size()));
    for (const Group& g : level) {
      out.push_back(static_cast<int>(g.members.size()));
      out.insert(out.end(), g.members.begin(), g.members.end());
    }
  }
  out.push_back(static_cast<int>(plan.offnode.size()));
  out.insert(out.end(), plan.offnode.begin(), plan.offnode.end());
  out.insert(out.end(), plan.pu_of.begin(), plan.pu_of.end());
  put_string(out, plan.level_names[0]);
  put_string(out, plan.machine[0]);
  return out;
}

// Appends node `node` (its ranks from `first` on, `ranks` of them) to `plan`.
void append_node_plan(HierarchyPlan& plan, int node, int first, int ranks, const int* in) {
  if (*in++ != 1) throw UsageError(get_string(in));
  auto& levels = plan.levels.emplace_back();
  const int level_count = *in++;
  for (int l = 0; l < level_count; ++l) {
    auto& groups = levels.emplace_back();
    const int group_count = *in++;
    for (int g = 0; g < group_count; ++g) {
      Group group{node, l, {}};
      const int members = *in++;
      for (int m = 0; m < members; ++m) group.members.push_back(first + *in++);
      groups.push_back(std::move(group));
    }
  }
  const int offnode = *in++;
  for (int i = 0; i < offnode; ++i) plan.offnode.push_back(first + *in++);
  for (int i = 0; i < ranks; ++i) {
    plan.pu_of.push_back(*in++);
    plan.node_of.push_back(node);
  }
  plan.first_rank.push_back(first);
  plan.level_names.push_back(get_string(in));
  plan.machine.push_back(get_string(in));
}

// The leader's view of its node: its machine, its ranks bound as the
// processes are (all bound within a core), else by block distribution.
std::vector<int> plan_own_node(const CommOptions& options, const std::vector<int>& pus) {
  try {
    NodeSpec spec{Machine::detect(), static_cast<int>(pus.size()), {}};
    const bool bound = std::all_of(pus.begin(), pus.end(), [&](int pu) { return pu >= 0 && pu < spec.machine.pus(); });
    if (bound) {
      spec.binding = pus;
      try {
        return serialise_node_plan(plan_hierarchy({spec}, options.grouping, options.multi_leader));
      } catch (const UsageError&) {
        // Bound in an order that would make a group non-contiguous: plan as
        // if unbound rather than refuse (the groups then follow rank order).
        spec.binding.clear();
      }
    }
    return serialise_node_plan(plan_hierarchy({spec}, options.grouping, options.multi_leader));
  } catch (const std::exception& e) {
    std::vector<int> out{0};
    put_string(out, e.what());
    return out;
  }
}

}  // namespace copse::mpi
