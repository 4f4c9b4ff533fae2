// Options turned into what the library runs with (TeamOptions, PlanOptions,
// the cost model), and the option values written back out as text.
#include "config/config.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <system_error>

#include "common/error.hpp"
#include "plan/planner.hpp"

namespace copse {

std::string ConfigSource::to_string() const {
  switch (kind) {
    case Kind::default_value: return "default";
    case Kind::file: return "file " + origin;
    case Kind::env: return "env " + origin;
    case Kind::explicit_setting: return "cli";
  }
  return "?";
}

std::string_view ConfigSource::kind_name() const {
  switch (kind) {
    case Kind::default_value: return "default";
    case Kind::file: return "file";
    case Kind::env: return "env";
    case Kind::explicit_setting: return "cli";
  }
  return "?";
}

const AlgorithmInfo& CollectiveOptions::algorithm(Collective collective) const {
  return find_algorithm(collective, algorithm_name(*this, collective));
}

std::string_view to_string(MpiCollective c) {
  switch (c) {
    case MpiCollective::allreduce: return "allreduce";
    case MpiCollective::reduce: return "reduce";
    case MpiCollective::bcast: return "bcast";
    case MpiCollective::barrier: return "barrier";
    case MpiCollective::allgather: return "allgather";
    case MpiCollective::reduce_scatter_block: return "reduce_scatter_block";
    case MpiCollective::reduce_scatter: return "reduce_scatter";
    case MpiCollective::scatter: return "scatter";
    case MpiCollective::gather: return "gather";
    case MpiCollective::alltoall: return "alltoall";
    case MpiCollective::allgatherv: return "allgatherv";
    case MpiCollective::gatherv: return "gatherv";
    case MpiCollective::scatterv: return "scatterv";
    case MpiCollective::alltoallv: break;
  }
  return "alltoallv";
}

namespace {
std::chrono::milliseconds whole_milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000)));
}
}  // namespace

std::optional<std::chrono::milliseconds> RuntimeOptions::wait_timeout_ms() const {
  if (!wait_timeout) return std::nullopt;
  return whole_milliseconds(*wait_timeout);
}

std::chrono::milliseconds RuntimeOptions::wait_report_ms() const { return whole_milliseconds(wait_report); }

CostModel make_cost_model(const ModelOptions& m) {
  std::vector<LinkCost> levels{LinkCost{m.intra_alpha, m.intra_beta, m.intra_overhead, m.intra_gap},
                               LinkCost{m.inter_alpha, m.inter_beta, m.inter_overhead, m.inter_gap}};
  if (m.group_size > 0)
    levels.insert(levels.begin(), LinkCost{m.group_alpha, m.group_beta, m.intra_overhead, m.intra_gap});
  CostModel model(std::move(levels), m.gamma, m.ports, m.receive_overhead);
  model.with_timing(m.timing).with_nic(NicCost{m.nic_beta, m.nic_rails}).with_group_size(m.group_size);
  return model;
}

PlanOptions make_plan_options(const Options& options) {
  PlanOptions plan;
  const CollectiveOptions& c = options.collectives;
  plan.allreduce = c.allreduce;
  plan.reduce = c.reduce;
  plan.bcast = c.bcast;
  plan.barrier = c.barrier;
  plan.allgather = c.allgather;
  plan.reduce_scatter = c.reduce_scatter;
  plan.scatter = c.scatter;
  plan.gather = c.gather;
  plan.alltoall = c.alltoall;
  plan.blocks = c.blocks.value_or(0);
  plan.model = make_cost_model(options.model);
  plan.grouping = options.hierarchy.parsed_grouping();
  plan.form = options.hierarchy.form;
  plan.multi_leader = options.hierarchy.multi_leader;
  return plan;
}

TeamOptions make_team_options(const Options& options, std::span<const int> ranks_per_node) {
  if (ranks_per_node.empty()) throw UsageError("a team needs at least one node");
  const Machine machine =
      options.hierarchy.node_topology.empty() ? Machine::detect() : Machine::synthetic(options.hierarchy.node_topology);
  TeamOptions team;
  for (int ranks : ranks_per_node) {
    if (ranks < 1) throw UsageError("a node must hold at least one rank, got " + std::to_string(ranks));
    team.nodes.push_back(NodeSpec{machine, ranks, {}});
  }
  static_cast<PlanOptions&>(team) = make_plan_options(options);
  team.wait_timeout = options.runtime.wait_timeout_ms();
  team.wait_report = options.runtime.wait_report_ms();
  return team;
}

std::string exact_time_text(double seconds) {
  if (seconds == 0) return "0s";
  if (!std::isfinite(seconds) || seconds < 0) return std::to_string(seconds);  // not a TIME; never produced
  // Shortest round-trip digits d.ddd and exponent E: seconds = d.ddd x 10^E.
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, seconds, std::chars_format::scientific);
  if (ec != std::errc{}) return std::to_string(seconds);
  const std::string_view sci(buffer, static_cast<std::size_t>(end - buffer));
  const std::size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  int exponent = 0;
  std::string_view exp_text = sci.substr(e + 1);
  if (!exp_text.empty() && exp_text.front() == '+') exp_text.remove_prefix(1);
  std::from_chars(exp_text.data(), exp_text.data() + exp_text.size(), exponent);

  // The largest unit whose value is at least 1 (ps for anything smaller).
  static constexpr std::array<std::pair<int, const char*>, 5> units{
      {{0, "s"}, {-3, "ms"}, {-6, "us"}, {-9, "ns"}, {-12, "ps"}}};
  auto unit = units.back();
  for (const auto& u : units)
    if (exponent >= u.first) {
      unit = u;
      break;
    }
  // Move the decimal point: the number in that unit has `whole` digits before it.
  const long whole = 1L + exponent - unit.first;
  std::string number;
  if (whole <= 0) {
    number = "0." + std::string(static_cast<std::size_t>(-whole), '0') + digits;
  } else if (static_cast<std::size_t>(whole) >= digits.size()) {
    number = digits + std::string(static_cast<std::size_t>(whole) - digits.size(), '0');
  } else {
    number = digits.substr(0, static_cast<std::size_t>(whole)) + "." + digits.substr(static_cast<std::size_t>(whole));
  }
  return number + unit.second;
}

}  // namespace copse
