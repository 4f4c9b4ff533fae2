#include "algorithms/shift_sim.hpp"

#include <algorithm>
#include <utility>

namespace copse {

namespace {

using Index = std::int64_t;

Index wrap(Index x, Index p) {
  x %= p;
  return x < 0 ? x + p : x;
}

// The clocks of positions [start, start + len): first, first + step, ...
struct Run {
  Index start = 0, len = 0;
  Picos first = 0, step = 0;
  Index end() const { return start + len; }
  Picos at(Index v) const { return first + (v - start) * step; }
};

// What the step of a diagonal's rank does: the bytes it sends to its right
// neighbour and receives from its left one, and its local work after them.
struct Rule {
  std::uint64_t send_bytes = 0, recv_bytes = 0;
  bool send = false, recv = false;
  Picos work = 0;
};

// A rank's clock after a step under `rule`, from its left neighbour's, its
// own and its right neighbour's before it: the step-by-step run's RankClock
// arithmetic (a rank's ports are never later than its step's start, so its
// ready times are its start). A step with neither transfer is not yielded.
Picos after_step(const Rule& rule, const PairCost& pair, Picos left, Picos self, Picos right) {
  if (!rule.send && !rule.recv) return self;
  Picos end = self;
  if (rule.send) end = std::max(end, pair.ends(rule.send_bytes, self, right).send_end);
  if (rule.recv) end = std::max(end, pair.ends(rule.recv_bytes, left, self).recv_end);
  return end + rule.work;
}

// Positions [start, end) sharing one rule.
struct Segment {
  Index start = 0, end = 0;
  Rule rule;
};

// The profile of clocks over the p diagonals: position v holds the clock of
// rank r = v + s after s steps (mod p). The step s of the rank at position
// v + 1 sends chunk v + 1 + k and receives chunk v + k, where
// k = s0 + shift for the phase begun at step s0; its clock after the step is
// position v's after it.
class Profile {
 public:
  explicit Profile(Index p) : p_(p) { runs_.push_back(Run{0, p, 0, 0}); }

  void step(const std::vector<Segment>& segments, const PairCost& pair) {
    next_.clear();
    std::size_t j = 0;
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      const Run run = runs_[i];
      const Index bulk_end = run.end() - 2;  // below it a position reads its own run alone
      for (Index v = run.start; v < run.end();) {
        while (segments[j].end <= v) ++j;
        const Segment& seg = segments[j];
        const Index piece_end = std::min(run.end(), seg.end);
        if (v < bulk_end) {
          // An arithmetic run under one rule stays one: every clock of the
          // step is a max of sums, so moving the inputs by d moves it by d.
          const Index e = std::min(piece_end, bulk_end);
          const Picos x = run.at(v);
          push(Run{v, e - v, after_step(seg.rule, pair, x, x + run.step, x + 2 * run.step), run.step});
          v = e;
        } else {
          push(Run{v, 1, after_step(seg.rule, pair, run.at(v), value(i, v + 1), value(i, v + 2)), 0});
          ++v;
        }
      }
    }
    std::swap(runs_, next_);
  }

  const std::vector<Run>& runs() const { return runs_; }

 private:
  // The clock at position w (below 2p), at or after run i's start.
  Picos value(std::size_t i, Index w) const {
    if (w >= p_) w -= p_, i = 0;
    while (runs_[i].end() <= w) ++i;
    return runs_[i].at(w);
  }

  // Appends the next positions, joining them to the last run where they
  // continue its progression.
  void push(const Run& r) {
    if (!next_.empty()) {
      Run& last = next_.back();
      if (last.len == 1 && (r.len == 1 || r.first - last.first == r.step)) {
        last.step = r.first - last.first;
        last.len += r.len;
        return;
      }
      if (last.len > 1 && (r.len == 1 || r.step == last.step) && r.first == last.at(last.end())) {
        last.len += r.len;
        return;
      }
    }
    next_.push_back(r);
  }

  Index p_;
  std::vector<Run> runs_, next_;
};

// The rules of a phase's steps over positions [0, p): chunk sizes change only
// at chunk 0, at the last of the larger chunks and at the last chunk, so a
// handful of segments.
std::vector<Segment> segments_of(const BlockPartition& chunks, Index p, Index k, Combine combine,
                                 const SimulationOptions& options) {
  const auto blocks = static_cast<Index>(chunks.blocks);
  const auto larger = static_cast<Index>(chunks.count % static_cast<std::uint64_t>(blocks));
  std::vector<Index> cuts{0};
  for (Index x : {Index{0}, larger, blocks}) cuts.push_back(wrap(x - k, p)), cuts.push_back(wrap(x - 1 - k, p));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  cuts.push_back(p);
  std::vector<Segment> segments;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const Index v = cuts[i];
    const std::uint64_t sent = chunks.size(wrap(v + 1 + k, p)), received = chunks.size(wrap(v + k, p));
    Rule rule;
    rule.send = sent > 0;
    rule.recv = received > 0;
    rule.send_bytes = sent * options.element_bytes;
    rule.recv_bytes = received * options.element_bytes;
    rule.work = options.model.step_work(combine == Combine::replace ? 0 : received, rule.recv, options.element_bytes);
    segments.push_back(Segment{v, cuts[i + 1], rule});
  }
  return segments;
}

// How many of the len indices lo, lo + 1, ... (mod p) are below m (m <= p).
std::uint64_t below(Index lo, Index len, Index m, Index p) {
  const auto overlap = [m](Index a, Index b) {
    return static_cast<std::uint64_t>(std::max<Index>(0, std::min(b, m) - a));
  };
  std::uint64_t n = static_cast<std::uint64_t>(len / p) * static_cast<std::uint64_t>(m);
  len %= p;
  return n + (lo + len <= p ? overlap(lo, lo + len) : overlap(lo, p) + overlap(0, lo + len - p));
}

// Each rank's step count and elements received, counted from the promise: at
// step t of a phase rank r handles chunks x = r - t + shift (sent, and x - 1
// received); its step is yielded if either is not void.
void count_steps(const ShiftPlan& plan, Index p, SimulationResult& result) {
  const BlockPartition& chunks = plan.chunks;
  const Index blocks = chunks.count == 0 ? 0 : static_cast<Index>(chunks.blocks);
  const std::uint64_t each = blocks == 0 ? 0 : chunks.count / static_cast<std::uint64_t>(blocks);
  const Index larger = blocks == 0 ? 0 : static_cast<Index>(chunks.count % static_cast<std::uint64_t>(blocks));
  for (const ShiftPhase& phase : plan.phases) {
    result.messages += static_cast<std::uint64_t>(phase.steps) * static_cast<std::uint64_t>(blocks);
    result.elements_moved += static_cast<std::uint64_t>(phase.steps) * chunks.count;
  }
  for (Index r = 0; r < p; ++r) {
    std::uint64_t steps = 0, received = 0;
    for (const ShiftPhase& phase : plan.phases) {
      const Index lo = wrap(r + phase.shift - phase.steps + 1, p);
      if (blocks > 0)
        steps += blocks >= p ? static_cast<std::uint64_t>(phase.steps) : below(lo, phase.steps, blocks + 1, p);
      received +=
          each * below(wrap(lo - 1, p), phase.steps, blocks, p) + below(wrap(lo - 1, p), phase.steps, larger, p);
    }
    result.max_steps = std::max(result.max_steps, steps);
    result.max_elements_received = std::max(result.max_elements_received, received);
  }
}

}  // namespace

SimulationResult simulate_shift(const ShiftPlan& plan, int ranks, const SimulationOptions& options) {
  const Index p = ranks;
  const RankMap layout = options.layout ? *options.layout : RankMap::uniform(ranks, 0);
  const PairCost pair = ranks > 1 ? options.model.pair_cost(layout, 0, 1) : PairCost{};
  Profile profile(p);
  Index steps = 0;
  for (const ShiftPhase& phase : plan.phases) {
    const std::vector<Segment> segments =
        segments_of(plan.chunks, p, wrap(steps + phase.shift, p), phase.combine, options);
    for (Index t = 0; t < phase.steps; ++t) profile.step(segments, pair);
    steps += phase.steps;
  }
  SimulationResult result;
  result.finish.resize(static_cast<std::size_t>(p));
  for (const Run& run : profile.runs())
    for (Index v = run.start; v < run.end(); ++v)
      result.finish[static_cast<std::size_t>(wrap(v + steps, p))] = run.at(v);
  for (Index r = 0; r < p; ++r)
    if (const Picos f = result.finish[static_cast<std::size_t>(r)]; f > result.time)
      result.time = f, result.slowest_rank = static_cast<int>(r);
  count_steps(plan, p, result);
  return result;
}

}  // namespace copse
