#include "common/cost_model.hpp"

#include <cmath>

#include "common/error.hpp"

namespace copse {

namespace {
// Round half up; the argument is never negative. (llround is a libm call on
// the simulator's hottest path.)
Picos round_picos(double x) { return static_cast<Picos>(x + 0.5); }
}  // namespace

CostModel::CostModel(std::vector<LinkCost> levels, double gamma, Ports ports, double receive_overhead)
    : levels_(std::move(levels)),
      gamma_(gamma),
      gamma_ps_(gamma * 1e12),
      receive_overhead_(receive_overhead),
      receive_overhead_ps_(round_picos(receive_overhead * 1e12)),
      ports_(ports) {
  if (!(receive_overhead >= 0) || !std::isfinite(receive_overhead))
    throw UsageError("cost model: the receive overhead must be finite and non-negative");
  if (levels_.empty()) throw UsageError("cost model needs at least one link level");
  for (const auto& l : levels_) {
    if (!(l.alpha >= 0) || !(l.beta >= 0) || !std::isfinite(l.alpha) || !std::isfinite(l.beta))
      throw UsageError("cost model: alpha and beta must be finite and non-negative");
    scaled_.push_back({static_cast<Picos>(std::llround(l.alpha * 1e12)), l.beta * 1e12});
  }
  if (!(gamma >= 0) || !std::isfinite(gamma)) throw UsageError("cost model: gamma must be finite and non-negative");
}

CostModel CostModel::uniform(LinkCost link, double gamma, Ports ports) { return CostModel({link, link}, gamma, ports); }

Picos CostModel::transfer(int level, std::uint64_t bytes) const {
  const auto& s = scaled_.at(static_cast<std::size_t>(level));
  return s.alpha + round_picos(s.beta * static_cast<double>(bytes));
}

Picos CostModel::step_work(const Step& step, std::uint64_t element_bytes) const {
  return combine(local_work_elements(step) * element_bytes) + (step.recv ? receive_overhead_ps_ : 0);
}

Picos CostModel::combine(std::uint64_t bytes) const { return round_picos(gamma_ps_ * static_cast<double>(bytes)); }

}  // namespace copse
