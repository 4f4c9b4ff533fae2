#include "common/cost_model.hpp"

#include <cmath>

#include "common/error.hpp"

namespace copse {

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
    if (!(l.overhead >= 0) || !(l.gap >= 0) || !std::isfinite(l.overhead) || !std::isfinite(l.gap))
      throw UsageError("cost model: overhead and gap must be finite and non-negative");
    scaled_.push_back({static_cast<Picos>(std::llround(l.alpha * 1e12)), l.beta * 1e12,
                       static_cast<Picos>(std::llround(l.overhead * 1e12)),
                       static_cast<Picos>(std::llround(l.gap * 1e12))});
  }
  if (!(gamma >= 0) || !std::isfinite(gamma)) throw UsageError("cost model: gamma must be finite and non-negative");
}

CostModel CostModel::uniform(LinkCost link, double gamma, Ports ports) { return CostModel({link, link}, gamma, ports); }

CostModel CostModel::cluster() {
  namespace d = model_defaults;
  CostModel m({LinkCost{d::same_node.alpha, d::same_node.beta, d::cluster_same_node_overhead, 0},
               LinkCost{d::other_node.alpha, d::other_node.beta, d::cluster_other_node_overhead, 0}});
  m.with_timing(d::cluster_timing).with_nic(d::cluster_nic);
  return m;
}

CostModel& CostModel::with_timing(Timing timing) {
  timing_ = timing;
  return *this;
}

CostModel& CostModel::with_nic(NicCost nic) {
  if (!(nic.beta >= 0) || !std::isfinite(nic.beta))
    throw UsageError("cost model: the interface's beta must be finite and non-negative");
  if (nic.rails < 1) throw UsageError("cost model: a shared interface needs at least one rail");
  nic_ = nic;
  return *this;
}

CostModel& CostModel::with_group_size(int ranks) {
  if (ranks < 0) throw UsageError("cost model: the group size must be non-negative");
  if (ranks > 0 && levels() < 3)
    throw UsageError("cost model: a group level needs three link levels (same group, same node, other node)");
  group_size_ = ranks;
  return *this;
}

NicLoad measure_nic_load(const SchedulePlan& plan, int ranks, const RankMap& layout) {
  NicLoad load;
  load.senders.assign(static_cast<std::size_t>(layout.nodes()), 0);
  load.receivers.assign(static_cast<std::size_t>(layout.nodes()), 0);
  auto off_node = [&](int r, const Transfer& t) { return t && t.peer < ranks && !layout.same_node(r, t.peer); };
  for (int r = 0; r < ranks; ++r) {
    bool sends = false, receives = false;
    for (auto schedule = plan(r); schedule.next() && !(sends && receives);) {
      sends = sends || off_node(r, schedule.value().send);
      receives = receives || off_node(r, schedule.value().recv);
    }
    const auto node = static_cast<std::size_t>(layout.node(r));
    load.senders[node] += sends ? 1 : 0;
    load.receivers[node] += receives ? 1 : 0;
  }
  return load;
}

CostModel CostModel::for_schedule(const SchedulePlan& plan, int ranks, const RankMap& layout) const {
  CostModel m = *this;
  if (nic_.beta > 0 && !nic_load_ && layout.nodes() > 1)
    m.nic_load_ = std::make_shared<const NicLoad>(measure_nic_load(plan, ranks, layout));
  return m;
}

int CostModel::level_of(const RankMap& layout, int a, int b) const {
  if (!layout.same_node(a, b)) return off_node_level();
  if (group_size_ == 0) return 0;
  return a / group_size_ == b / group_size_ ? 0 : 1;
}

double CostModel::per_byte_ps(const RankMap& layout, int level, int src, int dst) const {
  const double link = scaled_[static_cast<std::size_t>(level)].beta;
  if (nic_.beta <= 0 || layout.same_node(src, dst)) return link;
  int k = 1;
  if (nic_load_) {
    const auto at = [](const std::vector<int>& v, int node) {
      return node < static_cast<int>(v.size()) ? v[static_cast<std::size_t>(node)] : 1;
    };
    k = std::max({1, at(nic_load_->senders, layout.node(src)), at(nic_load_->receivers, layout.node(dst))});
  }
  const double share = std::max(1.0, static_cast<double>(k) / static_cast<double>(nic_.rails));
  return std::max(link, nic_.beta * 1e12 * share);
}

PairCost CostModel::pair_cost(const RankMap& layout, int src, int dst) const {
  const int level = level_of(layout, src, dst);
  const Scaled& s = scaled_.at(static_cast<std::size_t>(level));
  return PairCost{s.alpha, per_byte_ps(layout, level, src, dst), s.overhead, s.gap, timing_ == Timing::loggp};
}

Picos CostModel::transfer(int level, std::uint64_t bytes) const {
  const auto& s = scaled_.at(static_cast<std::size_t>(level));
  return s.alpha + round_picos(s.beta * static_cast<double>(bytes));
}

}  // namespace copse
