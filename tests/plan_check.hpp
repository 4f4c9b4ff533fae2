#pragma once
// Two compiled plans (plan/planner.hpp) compared step by step: what
// tests/test_planner.cpp checks of the emulator's plan against the thread
// Comm's, and tests/mpi/test_mpi_forms.cpp against the MPI Comm's.

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/schedule.hpp"
#include "plan/planner.hpp"
#include "transport/link_engine.hpp"

namespace copse::testing {

// Every rank's steps of `plan`.
inline std::vector<std::vector<Step>> steps_of(const CompiledPlan& plan) {
  std::vector<std::vector<Step>> all(static_cast<std::size_t>(plan.shape.ranks));
  const std::uint64_t elements = vector_elements(plan.algorithm->collective, plan.shape);
  for (int r = 0; r < plan.shape.ranks; ++r)
    (void)compile_steps(plan.plan, r, plan.shape.ranks, elements, all[static_cast<std::size_t>(r)]);
  return all;
}

inline bool same_steps(const std::vector<Step>& a, const std::vector<Step>& b) {
  auto same = [](const Transfer& x, const Transfer& y) {
    return x.peer == y.peer && x.offset == y.offset && x.count == y.count;
  };
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same(a[i].send, b[i].send) || !same(a[i].recv, b[i].recv) || a[i].combine != b[i].combine ||
        a[i].copy.from != b[i].copy.from || a[i].copy.to != b[i].copy.to || a[i].copy.count != b[i].copy.count)
      return false;
  return true;
}

// "" when `a` and `b` are the same plan -- form, algorithm, shape (ranks,
// count, blocks, root) and every rank's steps -- else their first difference.
inline std::string plan_difference(const CompiledPlan& a, const CompiledPlan& b) {
  if (a.form != b.form) return "form " + std::string(to_string(a.form)) + " vs " + std::string(to_string(b.form));
  if (a.algorithm != b.algorithm)
    return "algorithm " + std::string(a.algorithm->name) + " vs " + std::string(b.algorithm->name);
  auto shape = [](const Shape& s) {
    return std::to_string(s.ranks) + " ranks, count " + std::to_string(s.count) + ", blocks " +
           std::to_string(s.blocks) + ", root " + std::to_string(s.root);
  };
  if (shape(a.shape) != shape(b.shape)) return "shape " + shape(a.shape) + " vs " + shape(b.shape);
  const auto x = steps_of(a), y = steps_of(b);
  for (std::size_t r = 0; r < x.size(); ++r)
    if (!same_steps(x[r], y[r])) return "rank " + std::to_string(r) + "'s steps";
  return "";
}

}  // namespace copse::testing
