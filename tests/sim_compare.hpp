#pragma once
// What the tests of the simulator's shortcuts share: the check that two runs
// give every figure alike, per-rank finish times included, and the cost
// models under which every pair of ranks costs the same (the shortcuts'
// plain case).

#include <catch2/catch.hpp>
#include <vector>

#include "algorithms/simulator.hpp"

namespace copse::testing {

inline void check_same(const SimulationResult& a, const SimulationResult& b) {
  CHECK(a.time == b.time);
  CHECK(a.slowest_rank == b.slowest_rank);
  CHECK(a.max_steps == b.max_steps);
  CHECK(a.messages == b.messages);
  CHECK(a.elements_moved == b.elements_moved);
  CHECK(a.max_elements_received == b.max_elements_received);
  CHECK(a.finish == b.finish);
}

// Hockney and LogGP (with a gap and a shared interface, which every rank on
// a node of its own leaves unshared), with and without combining costs and
// receive overheads.
inline std::vector<CostModel> symmetric_models() {
  CostModel loggp = CostModel::cluster();
  CostModel gapped({LinkCost{1e-7, 1e-10, 3e-8, 9e-7}, LinkCost{1.3e-6, 3e-10, 2e-7, 4e-6}}, 7e-11);
  gapped.with_timing(Timing::loggp);
  return {CostModel(), loggp, gapped,
          CostModel({LinkCost{1e-6, 1e-9}, LinkCost{3e-6, 7e-10}}, 0, Ports::bidirectional, 5e-7),
          CostModel::uniform({3.3e-6, 1.7e-10}, 1.1e-11, Ports::bidirectional)};
}

}  // namespace copse::testing
