#include "tools/study_depth.hpp"

#include <algorithm>
#include <charconv>
#include <memory>
#include <sstream>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "plan/autotune.hpp"
#include "plan/hierarchical.hpp"

namespace copse {

std::string DepthForm::label(int ranks_per_node) const {
  if (group == 0) return name == "flat" ? "flat fan-out p-1" : "flat " + algorithm;
  if (group < 0) return "lanes, " + algorithm;
  int levels = 1;
  for (int span = group; span < ranks_per_node; span *= group) ++levels;
  return "groups of " + std::to_string(group) + (multi_leader ? ", multi-leader" : "") + " (" + std::to_string(levels) +
         (levels == 1 ? " level), " : " levels), ") + algorithm;
}

bool DepthForm::linear() const { return group == 0 && (algorithm == "flat" || algorithm == "chain"); }

std::vector<DepthForm> default_depth_forms() {
  std::vector<DepthForm> forms;
  for (const char* name : {"binomial", "binary-tree", "chain", "dual-root", "flat", "groups-2", "groups-4", "groups-8",
                           "multi-leader-2", "multi-leader-4", "lanes"})
    forms.push_back(parse_depth_form(name));
  return forms;
}

DepthForm parse_depth_form(std::string_view name) {
  const auto group_of = [&](std::string_view prefix) {
    int k = 0;
    const std::string_view digits = name.substr(prefix.size());
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (error != std::errc() || end != digits.data() + digits.size() || k < 2)
      throw UsageError("form '" + std::string(name) + "': expected " + std::string(prefix) + "K with K >= 2");
    return k;
  };
  if (name.starts_with("groups-")) return {std::string(name), "binomial", group_of("groups-"), false};
  if (name.starts_with("multi-leader-")) return {std::string(name), "binomial", group_of("multi-leader-"), true};
  if (name == "lanes") return {"lanes", "recursive-doubling", -1, false};
  for (const char* flat : {"binomial", "binary-tree", "chain", "dual-root", "flat"})
    if (name == flat) return {flat, flat, 0, false};
  throw UsageError("unknown form '" + std::string(name) +
                   "' (known: binomial, binary-tree, chain, dual-root, flat, groups-K, multi-leader-K, lanes)");
}

const DepthPoint* DepthStudy::find(std::size_t form, int nodes, std::uint64_t bytes) const {
  for (const auto& p : points)
    if (p.form == form && p.nodes == nodes && p.bytes == bytes) return &p;
  return nullptr;
}

namespace study_depth {

void check_depth_options(const DepthStudyOptions& o) {
  if (o.nodes.empty() || o.bytes.empty() || o.forms.empty()) throw UsageError("the study needs nodes, sizes and forms");
  if (o.ranks_per_node < 1) throw UsageError("ranks per node: at least 1");
  for (int n : o.nodes)
    if (n < 1) throw UsageError("nodes: at least 1 (got " + std::to_string(n) + ")");
  for (std::uint64_t b : o.bytes)
    if (b == 0 || b % 4 != 0)
      throw UsageError("sizes: a positive whole number of int32 (4 bytes), got " + std::to_string(b));
  for (const auto& f : o.forms)
    if (f.group > o.ranks_per_node)
      throw UsageError("form " + f.name + ": groups larger than a node of " + std::to_string(o.ranks_per_node));
}

void run_depth_point(const DepthStudyOptions& o, DepthPoint& pt) {
  const DepthForm& f = o.forms[pt.form];
  const AlgorithmInfo& algo = find_algorithm(Collective::allreduce, f.algorithm);
  const int k = o.ranks_per_node, p = pt.nodes * k;
  SimulationOptions options;
  options.model = o.model;
  options.layout = RankMap::uniform(p, k);
  options.element_bytes = 4;
  std::function<SchedulePlan(const Shape&)> plan_for = [&](const Shape& s) { return algo.plan(s); };
  std::shared_ptr<const HierarchyPlan> plan;
  if (f.group != 0) {
    std::vector<NodeSpec> nodes(static_cast<std::size_t>(pt.nodes),
                                NodeSpec{Machine::synthetic("core:" + std::to_string(k) + " pu:1"), k, {}});
    const int group = f.group < 0 ? std::min(2, k) : f.group;
    plan = std::make_shared<const HierarchyPlan>(
        plan_hierarchy(nodes, Grouping::parse("size:" + std::to_string(group)), f.multi_leader));
    if (f.group < 0)
      plan_for = [&](const Shape& s) { return plan_lanes(plan, algo, s); };
    else
      plan_for = [&](const Shape& s) { return plan_hierarchical(plan, algo, s); };
  }
  Shape shape{p, pt.bytes / 4, 1, 0};
  shape.blocks = best_blocks(plan_for, algo.pipelined, shape, options);
  pt.blocks = shape.blocks;
  pt.time = simulate(plan_for(shape), p, options).time;
}

}  // namespace study_depth

DepthStudy run_depth_study(const DepthStudyOptions& options, const ProgressCallback& progress) {
  study_depth::check_depth_options(options);
  DepthStudy study{options, {}};
  for (std::uint64_t b : options.bytes)
    for (std::size_t f = 0; f < options.forms.size(); ++f)
      for (int n : options.nodes)
        if (!options.forms[f].linear() || n * options.ranks_per_node <= options.linear_limit)
          study.points.push_back(DepthPoint{f, n, b, 1, 0});
  // The largest points first, so that no thread is left with one at the end.
  std::vector<std::size_t> order(study.points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return study.points[a].nodes * study.points[a].bytes > study.points[b].nodes * study.points[b].bytes;
  });
  for_each_point(
      order.size(), [&](std::size_t i) { study_depth::run_depth_point(options, study.points[order[i]]); }, progress);
  return study;
}

std::string depth_tables(const DepthStudy& study) {
  const DepthStudyOptions& o = study.options;
  std::ostringstream out;
  out << "Depth versus fan-out: allreduce (int32 sum) on nodes of " << o.ranks_per_node
      << " ranks, simulated virtual time in us at the best block count; * = fastest for that p\n";
  for (std::uint64_t b : o.bytes) {
    out << "\n" << format_bytes(b) << " per rank:\n" << study_pad("form \\ p", 48);
    for (int n : o.nodes) out << study_pad(std::to_string(n * o.ranks_per_node), 11, true);
    out << "\n";
    std::vector<Picos> best(o.nodes.size(), 0);
    for (std::size_t c = 0; c < o.nodes.size(); ++c)
      for (std::size_t f = 0; f < o.forms.size(); ++f)
        if (const DepthPoint* pt = study.find(f, o.nodes[c], b); pt && (best[c] == 0 || pt->time < best[c]))
          best[c] = pt->time;
    for (std::size_t f = 0; f < o.forms.size(); ++f) {
      out << study_pad(o.forms[f].label(o.ranks_per_node), 48);
      for (std::size_t c = 0; c < o.nodes.size(); ++c) {
        const DepthPoint* pt = study.find(f, o.nodes[c], b);
        out << (pt ? study_pad(study_us(to_seconds(pt->time)), 10, true) + (pt->time == best[c] ? "*" : " ")
                   : study_pad("-", 10, true) + " ");
      }
      out << "\n";
    }
  }
  return out.str();
}

StudyPlot write_depth_plot(const std::filesystem::path& dir, const DepthStudy& study) {
  const DepthStudyOptions& o = study.options;
  std::ostringstream data;
  for (std::uint64_t b : o.bytes) {
    data << "# " << format_bytes(b) << ": p, then one column per form (us; ? = not run)\n";
    for (int n : o.nodes) {
      data << n * o.ranks_per_node;
      for (std::size_t f = 0; f < o.forms.size(); ++f) {
        const DepthPoint* pt = study.find(f, n, b);
        data << " " << (pt ? study_us(to_seconds(pt->time), 3) : "?");
      }
      data << "\n";
    }
    data << "\n\n";
  }
  std::ostringstream gp;
  gp << "# Depth versus fan-out (copse study depth): gnuplot depth.gp\n"
     << "set terminal svg size " << 600 * o.bytes.size() << ",500 dynamic font 'sans,10'\nset output 'depth.svg'\n"
     << "set datafile missing '?'\nset multiplot layout 1," << o.bytes.size() << "\n"
     << (o.nodes.size() > 1 ? "set logscale xy\n" : "set logscale y\n")
     << "set xlabel 'ranks p'\nset ylabel 'virtual time (us)'\nset key top left font ',8'\nset grid\n";
  for (std::size_t block = 0; block < o.bytes.size(); ++block) {
    gp << "set title 'allreduce, " << format_bytes(o.bytes[block]) << " per rank, nodes of " << o.ranks_per_node
       << "'\nplot ";
    for (std::size_t f = 0; f < o.forms.size(); ++f)
      gp << (f ? ", " : "") << "'depth.dat' index " << block << " using 1:" << f + 2 << " with linespoints title '"
         << o.forms[f].label(o.ranks_per_node) << "'";
    gp << "\n";
  }
  gp << "unset multiplot\n";
  return render_gnuplot(dir, "depth", data.str(), gp.str());
}

}  // namespace copse
