#pragma once
// The emulated cluster: N nodes x k ranks as threads in one process, joined
// by in-process links, executing any registered schedule on real data.
//
// A link is a single-copy rendezvous: the sender publishes (address, count,
// ready time) in its outbox; the receiver reads the sender's memory directly
// (combining straight into its own buffer when the step's send and receive
// regions do not overlap, staging through scratch when they do), then acks
// with the transfer's end time. Each rank's virtual clock is the same
// RankClock the simulator uses, fed the same times, so for one schedule and
// model the emulator's virtual finish times equal the simulator's exactly.

#include <chrono>
#include <string>
#include <vector>

#include "common/reduce_op.hpp"
#include "common/cost_model.hpp"
#include "internode/registry.hpp"

namespace copse {

struct EmulatorConfig {
  int nodes = 1;
  int ranks_per_node = 1;
  std::vector<int> node_of;                  // if not empty: each rank's node (uneven nodes); replaces nodes x ranks_per_node
  CostModel model;                           // level 0: same node, level 1: other node
  int repetitions = 1;
  std::chrono::milliseconds wait_timeout{60000};  // a wait past this raises an error naming peer and step
};

struct EmulationResult {
  bool verified = false;
  std::string failure;                 // first wrong result: rank and element
  std::vector<Picos> virtual_finish;   // per rank (identical in every repetition)
  Picos virtual_time = 0;              // slowest rank
  std::vector<double> wall_seconds;    // per repetition: the slowest rank's time
  int blocks = 1;                      // block count the schedule used
};

// Plans the schedule once, runs `repetitions` times (barrier-separated, as in
// mpicroscope), verifies every rank's result against the sequential
// reference after each repetition. Throws UsageError for an operator the
// algorithm cannot serve (non-commutative op, commutative-only algorithm).
EmulationResult emulate(const AlgorithmInfo& algorithm, const Shape& shape, const ReduceOp& op,
                        const EmulatorConfig& config);
// The same for a schedule that is not the registry entry's own (a hierarchical
// composition): `algorithm` supplies the collective, the name and whether the
// operator must commute; `plan` supplies the steps.
EmulationResult emulate(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape,
                        const ReduceOp& op, const EmulatorConfig& config);

}  // namespace copse
