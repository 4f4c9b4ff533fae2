#include "plan/autotune.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace copse {

int best_blocks(const AlgorithmInfo& algorithm, const Shape& shape, const SimulationOptions& options) {
  return best_blocks([&algorithm](const Shape& s) { return algorithm.plan(s); }, algorithm.pipelined, shape, options);
}

int best_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, bool pipelined, const Shape& shape,
                const SimulationOptions& options) {
  return search_blocks(plan_for, pipelined, shape, options).blocks;
}

std::string_view to_string(BlockBound bound) {
  switch (bound) {
    case BlockBound::none: return "none";
    case BlockBound::element_count: return "element count";
    case BlockBound::max_blocks: return "maximum block count";
    case BlockBound::flat_gain: return "model gain flattens";
  }
  return "none";
}

BlockSearch search_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, bool pipelined, const Shape& shape,
                          const SimulationOptions& options) {
  if (!pipelined || shape.count <= 1) return {};
  long max_blocks = static_cast<long>(std::min<std::uint64_t>(shape.count, kMaxBlocks));
  std::map<long, Picos> seen;
  std::map<long, std::uint64_t> steps;
  auto cost = [&](long b) {
    b = std::clamp(b, 1L, max_blocks);
    if (auto it = seen.find(b); it != seen.end()) return it->second;
    Shape s = shape;
    s.blocks = static_cast<int>(b);
    const auto r = simulate(plan_for(s), s.ranks, options);
    steps[b] = r.max_steps;
    return seen[b] = r.time;
  };

  // T(b) = (c0 + c1*b)(alpha + w*m/b), w the per-byte cost: minimised at
  // b* = sqrt(c0*w*m / (c1*alpha)). c0 and c1 come from the step counts at
  // b = 1 and b = 2, so the start point fits whatever schedule this is.
  cost(1);
  cost(2);
  const double c1 = std::max<double>(1.0, static_cast<double>(steps[2]) - static_cast<double>(steps[1]));
  const double c0 = std::max<double>(1.0, static_cast<double>(steps[1]) - c1);
  double alpha = 0, per_byte = options.model.gamma();
  for (int l = 0; l < options.model.levels(); ++l) {
    alpha = std::max(alpha, options.model.level(l).alpha);
    per_byte = std::max(per_byte, options.model.level(l).beta + options.model.gamma());
  }
  const double bytes = static_cast<double>(shape.count * options.element_bytes);
  const double optimum = alpha > 0 ? std::sqrt(c0 * per_byte * bytes / (c1 * alpha)) : HUGE_VAL;
  // The bounds (see the header), tightest last.
  BlockSearch search;
  double start = optimum;
  auto bound = [&](double cap, BlockBound which) {
    if (start <= cap) return;
    start = cap, search.bound = which, search.cap = std::lround(cap);
    max_blocks = std::min(max_blocks, std::max(1L, search.cap));
  };
  bound(static_cast<double>(kMaxBlocks), BlockBound::max_blocks);
  bound(static_cast<double>(shape.count), BlockBound::element_count);
  bound(std::ceil(c0 / (c1 * kFlatGain)), BlockBound::flat_gain);
  start = std::max(start, 1.0);

  // Golden-section search on log b around the start point; T is close to
  // unimodal in b, and a bracket of a factor 16 each way is ample.
  double lo = std::log(std::max(1.0, start / 16)), hi = std::log(std::min<double>(max_blocks, start * 16));
  const double phi = (std::sqrt(5.0) - 1) / 2;
  auto at = [&](double x) { return cost(std::lround(std::exp(x))); };
  double x1 = hi - phi * (hi - lo), x2 = lo + phi * (hi - lo);
  for (int i = 0; i < 14 && hi - lo > 0.02; ++i) {
    if (at(x1) <= at(x2))
      hi = x2, x2 = x1, x1 = hi - phi * (hi - lo);
    else
      lo = x1, x1 = x2, x2 = lo + phi * (hi - lo);
  }
  cost(std::lround(start));
  // Ties go to fewer blocks: same time, less overhead on a real machine.
  auto best = std::min_element(seen.begin(), seen.end(), [](const auto& a, const auto& b) {
    return a.second < b.second || (a.second == b.second && a.first < b.first);
  });
  search.blocks = static_cast<int>(best->first);
  return search;
}

Shape with_segments(Shape shape, std::vector<std::uint64_t> segments) {
  auto hints = shape.hints ? std::make_shared<PlanHints>(*shape.hints) : std::make_shared<PlanHints>();
  shape.blocks = static_cast<int>(std::max<std::size_t>(segments.size(), 1));
  hints->segments = std::move(segments);
  shape.hints = std::move(hints);
  return shape;
}

SegmentSearch best_unequal_segments(const AlgorithmInfo& algorithm, const Shape& shape,
                                    const SimulationOptions& options) {
  if (!algorithm.explicit_segments)
    throw UsageError(std::string(to_string(algorithm.collective)) + " algorithm '" + std::string(algorithm.name) +
                     "' does not take explicit segment sizes");
  validate_shape(algorithm, shape);
  SegmentSearch search;
  const BlockPartition equal(shape.count, shape.blocks);
  for (int j = 0; shape.count > 0 && j < equal.blocks; ++j) search.segments.push_back(equal.size(j));
  auto time_of = [&](const std::vector<std::uint64_t>& segments) {
    ++search.simulations;
    const Shape s = with_segments(shape, segments);
    return simulate(algorithm.plan(s), s.ranks, options).time;
  };
  search.time = search.equal_time = time_of(search.segments);
  const std::size_t q = search.segments.size();
  if (q < 2) return search;
  // Moves of delta elements from segment `from` to `to`: between neighbours,
  // both ways, and between the first and the last.
  std::vector<std::pair<std::size_t, std::size_t>> moves;
  for (std::size_t j = 0; j + 1 < q; ++j) moves.push_back({j, j + 1}), moves.push_back({j + 1, j});
  if (q > 2) moves.push_back({0, q - 1}), moves.push_back({q - 1, 0});
  for (std::uint64_t delta = std::max<std::uint64_t>(1, shape.count / q / 8);; delta /= 2) {
    for (int improvements = 0; improvements < 64; ++improvements) {
      std::vector<std::uint64_t> best;
      Picos best_time = search.time;
      for (auto [from, to] : moves) {
        if (search.segments[from] <= delta) continue;  // no segment may become empty
        std::vector<std::uint64_t> candidate = search.segments;
        candidate[from] -= delta, candidate[to] += delta;
        if (const Picos t = time_of(candidate); t < best_time) best_time = t, best = std::move(candidate);
      }
      if (best.empty()) break;
      search.segments = std::move(best), search.time = best_time;
    }
    if (delta == 1) break;
  }
  return search;
}

int resolve_blocks(const std::function<SchedulePlan(const Shape&)>& plan_for, const AlgorithmInfo& algorithm,
                   Shape shape, std::optional<int> requested, const SimulationOptions& options, BlockSearch* search) {
  shape.blocks = 1;
  validate_shape(algorithm, shape);
  if (requested) {
    shape.blocks = *requested;
  } else {
    const BlockSearch found = search_blocks(
        plan_for ? plan_for : [&algorithm](const Shape& s) { return algorithm.plan(s); }, algorithm.pipelined, shape,
        options);
    shape.blocks = found.blocks;
    if (search) *search = found;
  }
  validate_shape(algorithm, shape);
  return shape.blocks;
}

}  // namespace copse
