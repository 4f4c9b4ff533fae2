#pragma once
// The emulated cluster: N nodes x k ranks as tasks in one process, joined
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
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/timeline.hpp"
#include "common/cost_model.hpp"
#include "common/rank_map.hpp"
#include "common/reduce_op.hpp"
#include "emulator/rank_fibers.hpp"

namespace copse {

struct EmulatorConfig {
  // The emulated nodes: which ranks share one (link level 0). Its rank count
  // must be the schedule's; the default is one node of one rank.
  RankMap layout;
  CostModel model;  // level 0: same node, level 1: other node
  int repetitions = 1;
  std::chrono::milliseconds wait_timeout{60000};  // a wait past this raises an error naming peer and step
  RankThreads* threads = nullptr;  // if set: the ranks run on these (reused); else on threads of their own
  // Each rank's arrival in virtual time (SimulationOptions::start): rank r's
  // clock starts at start[r] in every repetition. Empty: all at 0. Wall
  // time is not delayed.
  std::vector<Picos> start;
  // Record every rank's sends, receives and local work in the last
  // repetition (EmulationResult::timeline): virtual and wall times.
  bool record_timeline = false;
};

struct EmulationResult {
  bool verified = false;
  std::string failure;                // first wrong result: rank and element
  std::vector<Picos> virtual_finish;  // per rank (identical in every repetition)
  Picos virtual_time = 0;             // slowest rank
  std::vector<double> wall_seconds;   // per repetition: the slowest rank's time
  int blocks = 1;                     // block count the schedule used
  Timeline timeline;                  // with EmulatorConfig::record_timeline: rank 0's events first, then rank 1's, ...
};

// Plans the schedule once, runs `repetitions` times (barrier-separated, as in
// mpicroscope), verifies every rank's result against the sequential
// reference after each repetition. Throws UsageError for an operator the
// algorithm cannot serve (non-commutative op, commutative-only algorithm).
EmulationResult emulate(const AlgorithmInfo& algorithm, const Shape& shape, const ReduceOp& op,
                        const EmulatorConfig& config);
// The same, verified against `expected` -- what every verified rank holds,
// computed by the caller exactly as emulate() would (for an allreduce or
// reduce: reference_result(op, ranks, count)) -- instead of a reference
// computed here. For a caller that emulates one (ranks, count, operator)
// several times, e.g. with different block counts: the sequential reference
// of a large count costs about as much as the emulation. UsageError if its
// size is not the rank vector's.
EmulationResult emulate(const AlgorithmInfo& algorithm, const Shape& shape, const ReduceOp& op,
                        const EmulatorConfig& config, std::span<const std::byte> expected);
// The same for a schedule that is not the registry entry's own (a hierarchical
// composition): `algorithm` supplies the collective, the name and whether the
// operator must commute; `plan` supplies the steps.
EmulationResult emulate(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape,
                        const ReduceOp& op, const EmulatorConfig& config);

}  // namespace copse
