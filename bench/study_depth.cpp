// Study: depth versus fan-out. Allreduce (int32 sum) on nodes of 8 ranks under
// the cluster model of study_flat_hier (LogGP, a shared 25 GB/s interface per
// node, 10 GB/s per rank), p = 16 .. 4096 ranks through the simulator, at 8 B
// and 1 MiB, every form at its best block count:
//   flat trees over all ranks: binomial (fan-out log p, depth log p),
//     binary-tree (fan-out 2, depth log p), chain (fan-out 1, depth p),
//     dual-root, flat (fan-out p-1, depth 1);
//   two- and three-level hierarchies: groups of K = 2, 4, 8 ranks inside a
//     node (K = 2: three levels on a node of 8, a deep narrow tree; K = 8: one
//     level, fan-out 7), the node leaders joined by a binomial tree, and the
//     same with every group leader talking off-node (multi-leader);
//   lanes (Träff and Hunold 2020) with recursive doubling between nodes.
// Independent points run in parallel with oneTBB. Prints a table per size
// (time in us; the fastest form per p marked) and writes depth.dat,
// depth.gp and (with gnuplot) depth.svg into OUT (default study-depth).
// Usage: study_depth [OUT]
#include <tbb/parallel_for.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "plan/autotune.hpp"
#include "plan/hierarchical.hpp"

namespace {

using namespace copse;

constexpr int kPerNode = 8;

struct Form {
  std::string label;
  std::string algorithm;  // flat: the algorithm; hierarchical: the inter-node one
  int group = 0;          // 0: flat; K: groups of K; -1: lanes
  bool multi_leader = false;
};

const std::vector<Form> kForms = {
    {"flat binomial", "binomial", 0},
    {"flat binary-tree", "binary-tree", 0},
    {"flat chain", "chain", 0},
    {"flat dual-root", "dual-root", 0},
    {"flat fan-out p-1", "flat", 0},
    {"groups of 2 (3 levels), binomial", "binomial", 2},
    {"groups of 4 (2 levels), binomial", "binomial", 4},
    {"groups of 8 (1 level), binomial", "binomial", 8},
    {"groups of 2, multi-leader, binomial", "binomial", 2, true},
    {"groups of 4, multi-leader, binomial", "binomial", 4, true},
    {"lanes, recursive-doubling", "recursive-doubling", -1},
};

struct Point {
  std::size_t form;
  int nodes;
  std::uint64_t bytes;
  Picos time = 0;
};

void run_point(Point& pt) {
  const Form& f = kForms[pt.form];
  const AlgorithmInfo& algo = find_algorithm(Collective::allreduce, f.algorithm);
  const int p = pt.nodes * kPerNode;
  SimulationOptions options;
  options.model = CostModel::cluster();
  options.layout = RankMap::uniform(p, kPerNode);
  options.element_bytes = 4;
  std::function<SchedulePlan(const Shape&)> plan_for = [&](const Shape& s) { return algo.plan(s); };
  std::shared_ptr<const HierarchyPlan> plan;
  if (f.group != 0) {
    std::vector<NodeSpec> nodes(static_cast<std::size_t>(pt.nodes),
                                NodeSpec{Machine::synthetic("core:8 pu:1"), kPerNode, {}});
    plan = std::make_shared<const HierarchyPlan>(
        plan_hierarchy(nodes, Grouping::parse("size:" + std::to_string(f.group < 0 ? 2 : f.group)), f.multi_leader));
    if (f.group < 0)
      plan_for = [&](const Shape& s) { return plan_lanes(plan, algo, s); };
    else
      plan_for = [&](const Shape& s) { return plan_hierarchical(plan, algo, s); };
  }
  Shape shape{p, pt.bytes / 4, 1, 0};
  shape.blocks = best_blocks(plan_for, algo.pipelined, shape, options);
  pt.time = simulate(plan_for(shape), p, options).time;
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "study-depth";
  std::filesystem::create_directories(dir);
  const std::vector<int> node_counts = {2, 8, 32, 128, 512};
  const std::uint64_t sizes[] = {8, std::uint64_t{1} << 20};
  std::vector<Point> points;
  for (std::uint64_t b : sizes)
    for (std::size_t f = 0; f < kForms.size(); ++f)
      for (int n : node_counts) {
        // The flat fan-out p-1 tree and the chain grow linearly in p: stop them at 1024 ranks.
        if ((kForms[f].algorithm == "flat" || kForms[f].algorithm == "chain") && n * kPerNode > 1024) continue;
        points.push_back(Point{f, n, b});
      }
  tbb::parallel_for(std::size_t{0}, points.size(), [&](std::size_t i) { run_point(points[i]); });

  std::printf(
      "Depth versus fan-out: allreduce on nodes of %d ranks, cluster model (LogGP, shared 25 GB/s NIC,\n"
      "10 GB/s per rank), simulated virtual time in us at the best block count; * = fastest for that p\n",
      kPerNode);
  std::ofstream data(dir / "depth.dat");
  for (std::uint64_t b : sizes) {
    std::printf("\n%s per rank:\n%-40s", b >= 1024 ? "1 MiB" : "8 B", "form \\ p");
    for (int n : node_counts) std::printf(" %10d", n * kPerNode);
    std::printf("\n");
    std::vector<Picos> best(node_counts.size(), 0);
    for (const auto& pt : points)
      if (pt.bytes == b)
        for (std::size_t c = 0; c < node_counts.size(); ++c)
          if (node_counts[c] == pt.nodes && (best[c] == 0 || pt.time < best[c])) best[c] = pt.time;
    data << "# " << (b >= 1024 ? "1MiB" : "8B") << ": p, then one column per form (us; ? = not run)\n";
    for (std::size_t f = 0; f < kForms.size(); ++f) {
      std::printf("%-40s", kForms[f].label.c_str());
      for (std::size_t c = 0; c < node_counts.size(); ++c) {
        const Point* found = nullptr;
        for (const auto& pt : points)
          if (pt.bytes == b && pt.form == f && pt.nodes == node_counts[c]) found = &pt;
        if (found)
          std::printf(" %9.1f%s", to_seconds(found->time) * 1e6, found->time == best[c] ? "*" : " ");
        else
          std::printf(" %10s", "-");
      }
      std::printf("\n");
    }
    for (std::size_t c = 0; c < node_counts.size(); ++c) {
      data << node_counts[c] * kPerNode;
      for (std::size_t f = 0; f < kForms.size(); ++f) {
        const Point* found = nullptr;
        for (const auto& pt : points)
          if (pt.bytes == b && pt.form == f && pt.nodes == node_counts[c]) found = &pt;
        if (found)
          data << " " << to_seconds(found->time) * 1e6;
        else
          data << " ?";
      }
      data << "\n";
    }
    data << "\n\n";
  }
  data.close();
  std::ofstream gp(dir / "depth.gp");
  gp << "set terminal svg size 1200,500\nset output 'depth.svg'\nset datafile missing '?'\nset multiplot layout 1,2\n"
        "set logscale xy\nset xlabel 'ranks p'\nset ylabel 'virtual time (us)'\nset key top left font ',8'\n";
  for (int block = 0; block < 2; ++block) {
    gp << "set title 'allreduce, " << (block == 0 ? "8 B" : "1 MiB") << " per rank'\nplot ";
    for (std::size_t f = 0; f < kForms.size(); ++f)
      gp << (f ? ", " : "") << "'depth.dat' index " << block << " using 1:" << f + 2 << " with linespoints title '"
         << kForms[f].label << "'";
    gp << "\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  const bool plotted = std::system("command -v gnuplot > /dev/null 2>&1") == 0 &&
                       std::system(("cd '" + dir.string() + "' && gnuplot depth.gp").c_str()) == 0;
  std::printf("\nwrote %s and depth.gp; %s\n", (dir / "depth.dat").c_str(),
              plotted ? "the plot is depth.svg there" : "gnuplot is missing or failed: no plot (gnuplot-nox)");
  return 0;
}
