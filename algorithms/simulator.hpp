#pragma once
// Runs every rank's schedule against the others without data: matches each
// send with its receive (by (source, destination) pair in program order),
// advances the shared RankClock per rank, and detects size mismatches and
// deadlocks. Each rank has at most one send and one receive outstanding, so
// matching needs no event queue: a transfer's time is fixed the moment both
// sides have posted it, whatever order ranks are processed in.
//
// A plan that carries a StepCursor (algorithms/step_cursor.hpp) is walked
// through it, four bytes a rank, rather than through a coroutine frame per
// rank; its figures are the same bit for bit (tests/test_sim_scale.cpp).
// A ShiftPlan (algorithms/shift_plan.hpp: the ring) under options that
// charge every rank alike runs as one profile over the chunks: the cost of
// its steps times its profile's runs rather than of p ranks' steps, every
// figure exact.
//
// The simulator is this executor alone; the verifier adds a DataHooks that
// moves symbolic values.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/timeline.hpp"
#include "common/cost_model.hpp"
#include "common/error.hpp"
#include "common/rank_map.hpp"
#include "common/schedule.hpp"

namespace copse {

struct SimulationOptions {
  CostModel model;  // the documented defaults (cost_model.hpp)
  // Which ranks share a node (link level 0); unset: none do (every link is
  // level 1). Its rank count must be the simulation's.
  std::optional<RankMap> layout;
  std::uint64_t element_bytes = 1;
  // Each rank's arrival at the collective (an arrival pattern), in virtual
  // time: rank r's clock starts at start[r]. Empty: every rank at 0.
  std::vector<Picos> start;
  // If set, every send, receive and step's local work of the ranks below
  // `timeline_ranks` is appended to it (algorithms/timeline.hpp); unset, the
  // simulator records nothing and pays nothing for it.
  Timeline* timeline = nullptr;
  int timeline_ranks = std::numeric_limits<int>::max();
  // If set, called now and then during a long run (at most once per 2^20
  // steps simulated) with the ranks finished so far and the rank count: for
  // a progress line. Not called at all in a short run.
  std::function<void(std::uint64_t finished_ranks, std::uint64_t ranks)> progress;
};

// A rank that arrives at `offset`: its clock starts as if it had computed
// until then (one step of local work), so its ports are free from `offset`
// on. Both engines start their clocks this way, so their times agree for any
// arrival pattern.
inline void arrive_at(RankClock& clock, Picos offset) {
  clock.begin_step();
  clock.end_step(offset);
}

// Throws UsageError unless `start` is empty or holds one non-negative offset per rank.
void check_start_offsets(const std::vector<Picos>& start, int ranks);

// Observes data movement (the verifier's symbolic execution).
class DataHooks {
 public:
  virtual ~DataHooks() = default;
  // A matched transfer: src's `send` (posted in its step src_step) meets dst's
  // receive. Called before either step ends; the sender's region is as it
  // was at the start of its step.
  virtual void on_transfer(int src, std::uint64_t src_step, const Transfer& send, int dst, std::uint64_t dst_step,
                           const Step& dst_step_ops) = 0;
  // A rank's step ends: apply its receive (and copy).
  virtual void on_step_end(int rank, std::uint64_t step, const Step& ops) = 0;
};

struct SimulationResult {
  std::vector<Picos> finish;  // per rank (from the common origin of SimulationOptions::start)
  Picos time = 0;             // slowest rank
  int slowest_rank = 0;
  std::uint64_t max_steps = 0;  // longest rank's step count
  std::uint64_t messages = 0;
  std::uint64_t elements_moved = 0;
  // Elements that reached the rank that received most from its peers: the
  // per-rank traffic lower bounds are stated in (e.g. 2(p-1)/p of the vector
  // for an allreduce).
  std::uint64_t max_elements_received = 0;
};

// The most elements a step's transfer may move: the simulator's counts are
// 61-bit, and a schedule that moves more is refused (ScheduleError).
inline constexpr std::uint64_t kMostSimulatedElements = std::uint64_t{1} << 61;

SimulationResult simulate(const SchedulePlan& plan, int ranks, const SimulationOptions& options,
                          DataHooks* hooks = nullptr);

// The engines simulate() runs a plan on: a ShiftPlan's profile
// (shift_plan.hpp), a lockstep cursor's positions (lockstep_sim.hpp), a
// StepCursor rank by rank, or the plan's coroutines rank by rank.
enum class SimulationEngine { shift_profile, lockstep, cursor, coroutines };

// What decides the engine besides the plan. `plain`: every pair of ranks
// costs the same, with bidirectional ports, and no DataHooks or Timeline
// watches; `offsets`: the ranks arrive at different times.
struct RunTraits {
  bool plain = false;
  bool offsets = false;
};
SimulationEngine simulation_engine(const SchedulePlan& plan, const RunTraits& run);

// The bytes `engine` keeps per rank besides what the plan holds (a cursor's
// links, coroutine frames): its records and the result's finish times, at
// their peak together.
std::size_t simulator_bytes_per_rank(SimulationEngine engine);

// The PlanHints (common/schedule.hpp) telling builders what these options
// run: their cost model and element size, and optionally each rank's
// predicted arrival.
std::shared_ptr<const PlanHints> planning_hints(const SimulationOptions& options,
                                                std::vector<Picos> predicted_arrival = {});

}  // namespace copse
