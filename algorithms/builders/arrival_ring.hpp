#pragma once
// The machinery Proficz's two allreduces share (Proficz 2018, §4): the ranks
// stand in a ring in order of predicted arrival (position 0 the earliest),
// and the vector is cut into units that travel the ring from position i to
// i+1. A unit starts at some position with that rank's own data, travels
// P-1 hops being reduced (the reduce loops of Fig. 5 and Fig. 7), which ends
// it, complete, at the position just before its start (rp = sp - 1, Fig. 7
// line 13), then P-1 more hops as the finished result (the override loops).
// The sorted linear tree starts every unit at position 0; the pre-reduced
// ring starts units where Fig. 7's pre-steps say.
//
// Which unit a rank passes on when it holds several, and when, is decided
// by replaying the ring in rounds against the predicted arrivals: in each
// round every rank that has arrived passes one unit it holds, received at
// least one round before, to its successor if that one has arrived -- the
// earliest received first, ties by the builder's priority. A round is the
// predicted time of one unit's transfer and combine. Each rank's steps are
// its rounds (the unit it sends and the one it receives in a round share one
// step), so both sides of every transfer list it in the same round, and the
// schedule cannot deadlock whenever the ranks really arrive. Only the order
// of the work depends on the predictions: a wrong prediction costs time, never
// correctness.
//
// Example, P = 3 with the rank at position 2 predicted two rounds late, SLT
// with two units u0, u1 (both start at 0): round 0: 0 -> 1 u0; round 1:
// 0 -> 1 u1, 1 -> 2 waits (2 not there); round 2: 1 -> 2 u0 (complete at 2);
// round 3: 1 -> 2 u1, 2 -> 0 u0 (finished); round 4: 2 -> 0 u1, 0 -> 1 u0;
// round 5: 0 -> 1 u1. Every rank holds both results after six rounds, four
// of them after the late rank's arrival.

#include <functional>
#include <memory>
#include <vector>

#include "common/cost_model.hpp"
#include "common/schedule.hpp"

namespace copse::builders {

struct RingUnit {
  std::uint64_t offset = 0, count = 0;  // the elements it covers (count > 0)
  int start = 0;                        // ring position where it starts
};

class ArrivalRing {
 public:
  // `order[i]`: the rank at ring position i; `arrival_round[i]`: the round
  // from which position i is predicted to be there. `priority(position,
  // unit)`: among units received in the same round, lower goes first.
  ArrivalRing(std::vector<int> order, std::vector<long> arrival_round, std::vector<RingUnit> units,
              const std::function<long(int position, int unit)>& priority);

  // One rank's steps; the schedule keeps `ring` alive while it runs.
  static RankSchedule rank_schedule(std::shared_ptr<const ArrivalRing> ring, int rank);
  long rounds() const { return rounds_; }

 private:
  struct RoundStep {
    long round;
    int send_unit = -1, recv_unit = -1;
    bool combine = false;  // the received unit is still being reduced
  };
  std::vector<int> order_, position_of_;
  std::vector<RingUnit> units_;
  std::vector<std::vector<RoundStep>> steps_;  // per position, by round
  long rounds_ = 0;
};

// The predicted arrival of each ring position in rounds of `round_time`
// (rounded up), counted from the earliest one.
std::vector<long> arrival_rounds(const std::vector<Picos>& arrival, const std::vector<int>& order, Picos round_time);

// Runs a plan built once per shape for every rank.
inline SchedulePlan ring_plan(std::shared_ptr<const ArrivalRing> ring) {
  return [ring](int rank) { return ArrivalRing::rank_schedule(ring, rank); };
}

}  // namespace copse::builders
