// Study: flat versus hierarchical allreduce at 1 MiB and 8 B on 4x8, 16x16 and
// 64x32 (nodes x ranks per node) under the cluster model below: LogGP timing
// (per-message overheads, overlapping wire latencies) and one shared network
// interface per node of 25 GB/s (40 ps/B, one rail) while one rank alone
// reaches 10 GB/s (100 ps/B, the inter-node beta). Every algorithm runs at its
// best block count (autotuned under the model). Hierarchical forms: one node
// leader, one leader per group of four (multi-leader), and lanes (Träff and
// Hunold 2020: node reduce-scatter, k inter-node allreduces on slices, node
// allgather). The 4x8 rows run on the
// emulator (verified, virtual time checked equal to the simulator's); the
// larger clusters on the simulator alone. Independent points run in parallel
// with oneTBB. Prints a table per (cluster, size) and writes
// flat_hier.dat, flat_hier.gp and (with gnuplot) flat_hier.svg into the
// directory given as the first argument (default: study-flat-hier).
#include <tbb/parallel_for.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tools/experiment.hpp"

namespace {

using namespace copse;

using S = Form;
// The forms (tools/experiment.hpp, HierarchyForm): groups of four, or one group per node (group 0).
const std::vector<HierarchyForm> kForms = {
    {S::flat, "ring", 0},
    {S::flat, "rabenseifner", 0},
    {S::flat, "recursive-doubling", 0},
    {S::flat, "two-tree", 0},
    {S::flat, "dual-root", 0},
    {S::leader, "ring", 4},
    {S::leader, "rabenseifner", 4},
    {S::leader, "dual-root", 4},
    {S::leader, "two-tree", 4},
    {S::leader, "rabenseifner", 0},
    {S::multi_leader, "rabenseifner", 4},
    {S::multi_leader, "dual-root", 4},
    {S::lanes, "rabenseifner", 0},
    {S::lanes, "ring", 0},
    {S::lanes, "dual-root", 0},
    {S::lanes, "recursive-doubling", 0},
};

struct Point {
  int nodes, per_node;
  std::uint64_t bytes;
  std::size_t form;
  Picos time = 0;
  int blocks = 1;
  bool emulated = false, ok = true;
};

// On the emulator when `p.emulated` (verified, virtual time = simulator's), else on the simulator.
void run_point(Point& p) {
  const HierarchyForm& form = kForms[p.form];
  const AlgorithmInfo& algo = find_algorithm(Collective::allreduce, form.algorithm);
  const std::uint64_t count = p.bytes / 4;
  ClusterSpec spec;
  spec.ranks_per_node.assign(static_cast<std::size_t>(p.nodes), p.per_node);
  spec.model = CostModel::cluster();
  const EmulatedCluster cluster(with_form(spec, form));
  if (p.emulated) {
    const CheckedEmulation run =
        run_checked_emulation(cluster, algo, builtin_op("sum", DType::int32), count, 0, std::nullopt);
    p.time = run.emulation.virtual_time;
    p.blocks = run.blocks;
    p.ok = run.ok;
    return;
  }
  const SimulatedRun run = run_simulated(cluster, algo, 4, count, 0, std::nullopt);
  p.blocks = run.blocks;
  p.time = run.result.time;
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "study-flat-hier";
  std::filesystem::create_directories(dir);
  const std::pair<int, int> clusters[] = {{4, 8}, {16, 16}, {64, 32}};
  const std::uint64_t sizes[] = {std::uint64_t{1} << 20, 8};
  std::vector<Point> points;
  for (auto [n, k] : clusters)
    for (std::uint64_t b : sizes)
      for (std::size_t f = 0; f < kForms.size(); ++f) points.push_back(Point{n, k, b, f, 0, 1, n * k <= 32, true});
  // The simulated points in parallel; the emulated ones (threads of their own) one at a time.
  tbb::parallel_for(std::size_t{0}, points.size(), [&](std::size_t i) {
    if (!points[i].emulated) run_point(points[i]);
  });
  for (auto& p : points)
    if (p.emulated) run_point(p);

  std::printf(
      "Flat versus hierarchical allreduce (int32 sum), cluster model: LogGP (L 1.5us, o 0.5us between nodes;\n"
      "L 0.2us, o 50ns on a node), 10 GB/s per rank, one shared 25 GB/s interface per node.\n"
      "Virtual time in us at the best block count; 4x8 emulated (verified, = simulator), others simulated.\n");
  std::ofstream data(dir / "flat_hier.dat");
  data << "# case best_flat_us best_hier_us\n";
  bool ok = true;
  for (auto [n, k] : clusters)
    for (std::uint64_t b : sizes) {
      std::printf("\n%dx%d, %s per rank:\n", n, k, b >= 1024 ? "1 MiB" : "8 B");
      Picos best_flat = 0, best_hier = 0;
      std::string flat_name, hier_name;
      for (const auto& p : points) {
        if (p.nodes != n || p.bytes != b) continue;
        const HierarchyForm& f = kForms[p.form];
        const bool flat = f.shape == Form::flat;
        ok = ok && p.ok;
        std::printf("  %-48s %12.2f  blocks %4d%s\n", f.label().c_str(), to_seconds(p.time) * 1e6, p.blocks,
                    p.emulated ? (p.ok ? "  emulated, ok" : "  emulated, FAILED") : "");
        Picos& best = flat ? best_flat : best_hier;
        if (best == 0 || p.time < best) {
          best = p.time;
          (flat ? flat_name : hier_name) = f.label();
        }
      }
      std::printf("  best flat %s %.2f us, best hierarchical %s %.2f us: hierarchical %.2fx %s\n", flat_name.c_str(),
                  to_seconds(best_flat) * 1e6, hier_name.c_str(), to_seconds(best_hier) * 1e6,
                  best_hier < best_flat ? static_cast<double>(best_flat) / static_cast<double>(best_hier)
                                        : static_cast<double>(best_hier) / static_cast<double>(best_flat),
                  best_hier < best_flat ? "faster" : "slower");
      data << "\"" << n << "x" << k << (b >= 1024 ? " 1MiB" : " 8B") << "\" " << to_seconds(best_flat) * 1e6 << " "
           << to_seconds(best_hier) * 1e6 << "\n";
    }
  data.close();
  std::ofstream(dir / "flat_hier.gp")
      << "set terminal svg size 900,500\nset output 'flat_hier.svg'\nset title 'Best flat vs best hierarchical "
         "allreduce (cluster model)'\nset style data histograms\nset style fill solid 0.8\nset logscale y\n"
         "set ylabel 'virtual time (us)'\nplot 'flat_hier.dat' using 2:xtic(1) title 'best flat', '' using 3 title "
         "'best hierarchical'\n";
  const bool plotted = std::system("command -v gnuplot > /dev/null 2>&1") == 0 &&
                       std::system(("cd '" + dir.string() + "' && gnuplot flat_hier.gp").c_str()) == 0;
  std::printf("\nwrote %s and flat_hier.gp; %s\n", (dir / "flat_hier.dat").c_str(),
              plotted ? ("the plot is " + (dir / "flat_hier.svg").string()).c_str()
                      : "gnuplot is missing or failed: no plot (Debian: gnuplot-nox)");
  return ok ? 0 : 1;
}
