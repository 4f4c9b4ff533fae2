#include "tools/study_traff.hpp"

#include <cstdio>
#include <sstream>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "plan/autotune.hpp"

namespace copse {
namespace study_traff {

// `collective` `algorithm` for `count` int32 on the study's ranks, with
// `blocks` (nullopt: the best count under `model`).
TraffTime simulate_traff(const TraffStudyOptions& o, const CostModel& model, Collective collective,
                         const char* algorithm, std::uint64_t count, std::optional<int> blocks) {
  const AlgorithmInfo& info = find_algorithm(collective, algorithm);
  const int p = o.nodes * o.ranks_per_node;
  SimulationOptions options;
  options.model = model;
  options.layout = RankMap::uniform(p, o.ranks_per_node);
  options.element_bytes = 4;
  Shape shape{p, count, 1, 0};
  shape.blocks = resolve_blocks({}, info, shape, blocks, options);
  return TraffTime{simulate(info.plan(shape), p, options).time, blocks_used(info, shape)};
}

TraffRow traff_row(const TraffStudyOptions& o, std::uint64_t count) {
  TraffRow row;
  row.count = count;
  for (const char* a : {"recursive-doubling", "rabenseifner", "ring"}) {
    const TraffTime t = simulate_traff(o, o.model, Collective::allreduce, a, count, 1);
    if (row.native_algorithm.empty() || t.time < row.native.time) row.native = t, row.native_algorithm = a;
  }
  row.reduce_bcast.time = simulate_traff(o, o.model, Collective::reduce, "binomial", count, 1).time +
                          simulate_traff(o, o.model, Collective::bcast, "binomial", count, 1).time;
  const int paper = static_cast<int>(std::max<std::uint64_t>(1, (count + o.block_elements - 1) / o.block_elements));
  row.tree_paper = simulate_traff(o, o.model, Collective::allreduce, "binary-tree", count, paper);
  row.dual_paper = simulate_traff(o, o.model, Collective::allreduce, "dual-root", count, paper);
  row.tree_auto = simulate_traff(o, o.model, Collective::allreduce, "binary-tree", count, std::nullopt);
  row.dual_auto = simulate_traff(o, o.model, Collective::allreduce, "dual-root", count, std::nullopt);
  return row;
}

// `m` with no combine cost: the beta terms alone. Rebuilt from its parts
// (CostModel has no setter for gamma), every part but gamma kept.
CostModel without_combine(const CostModel& m) {
  std::vector<LinkCost> levels;
  for (int l = 0; l < m.levels(); ++l) levels.push_back(m.level(l));
  CostModel c(levels, 0, m.ports(), m.receive_overhead());
  c.with_timing(m.timing());
  if (m.nic().beta > 0) c.with_nic(m.nic());
  if (m.group_size() > 0) c.with_group_size(m.group_size());
  return c;
}

double ratio(const TraffTime& a, const TraffTime& b) {
  return b.time > 0 ? static_cast<double>(a.time) / static_cast<double>(b.time) : 0.0;
}

}  // namespace study_traff

TraffStudy run_traff_study(const TraffStudyOptions& options, const ProgressCallback& progress) {
  if (options.counts.empty()) throw UsageError("the study needs element counts");
  if (options.nodes < 1 || options.ranks_per_node < 1 || options.nodes * options.ranks_per_node < 2)
    throw UsageError("the study needs at least 2 ranks");
  if (options.block_elements == 0) throw UsageError("the paper's block size: at least 1 element");
  TraffStudy study{options, std::vector<TraffRow>(options.counts.size()), {}, {}};
  const std::uint64_t total = options.counts.size() + 1;
  for_each_point(
      options.counts.size(), [&](std::size_t i) { study.rows[i] = study_traff::traff_row(options, options.counts[i]); },
      [&](std::uint64_t done, std::uint64_t) {
        if (progress) progress(done, total);
      });
  const CostModel no_combine = study_traff::without_combine(options.model);
  const std::uint64_t largest = options.counts.back();
  study.tree_gamma0 =
      study_traff::simulate_traff(options, no_combine, Collective::allreduce, "binary-tree", largest, std::nullopt);
  study.dual_gamma0 =
      study_traff::simulate_traff(options, no_combine, Collective::allreduce, "dual-root", largest, std::nullopt);
  if (progress) progress(total, total);
  return study;
}

std::string traff_table(const TraffStudy& study) {
  const TraffStudyOptions& o = study.options;
  std::ostringstream out;
  char line[320];
  out << "Traff 2021 Table 2 under the model: " << o.nodes << " x " << o.ranks_per_node << " = "
      << o.nodes * o.ranks_per_node << " ranks, MPI_INT sums, paper blocks = ceil(count / " << o.block_elements
      << "), times in us\n";
  std::snprintf(line, sizeof line, "%9s %31s %13s %16s %16s %16s %16s %9s %9s\n", "count", "native (model)",
                "reduce+bcast", "tree paper", "dual paper", "tree auto", "dual auto", "t/d paper", "t/d auto");
  out << line;
  for (const TraffRow& r : study.rows) {
    const auto cell = [](const TraffTime& t) {
      char text[40];
      std::snprintf(text, sizeof text, "%9.2f (b=%-3d)", to_seconds(t.time) * 1e6, t.blocks);
      return std::string(text);
    };
    std::snprintf(line, sizeof line, "%9llu %12.2f %18s %13.2f %16s %16s %16s %16s %9.3f %9.3f\n",
                  static_cast<unsigned long long>(r.count), to_seconds(r.native.time) * 1e6, r.native_algorithm.c_str(),
                  to_seconds(r.reduce_bcast.time) * 1e6, cell(r.tree_paper).c_str(), cell(r.dual_paper).c_str(),
                  cell(r.tree_auto).c_str(), cell(r.dual_auto).c_str(), study_traff::ratio(r.tree_paper, r.dual_paper),
                  study_traff::ratio(r.tree_auto, r.dual_auto));
    out << line;
  }
  std::snprintf(line, sizeof line,
                "gamma 0 at %llu: tree %.2f us, dual %.2f us, tree/dual %.3f (the 4/3 of the beta terms, less the "
                "latency terms)\n",
                static_cast<unsigned long long>(o.counts.back()), to_seconds(study.tree_gamma0.time) * 1e6,
                to_seconds(study.dual_gamma0.time) * 1e6, study_traff::ratio(study.tree_gamma0, study.dual_gamma0));
  out << line;
  return out.str();
}

StudyPlot write_traff_plot(const std::filesystem::path& dir, const TraffStudy& study) {
  std::ostringstream data;
  data << "# count native reduce+bcast tree_paper dual_paper tree_auto dual_auto (us) tree/dual_paper "
          "tree/dual_auto\n";
  for (const TraffRow& r : study.rows) {
    if (r.count == 0) continue;  // no place on a log scale: it is in the table
    data << r.count;
    for (const TraffTime* t : {&r.native, &r.reduce_bcast, &r.tree_paper, &r.dual_paper, &r.tree_auto, &r.dual_auto})
      data << " " << study_us(to_seconds(t->time), 3);
    data << " " << study_traff::ratio(r.tree_paper, r.dual_paper) << " " << study_traff::ratio(r.tree_auto, r.dual_auto)
         << "\n";
  }
  std::ostringstream gp;
  gp << "# Traff 2021 Table 2 under the model (copse study traff): gnuplot traff.gp\n"
     << "set terminal svg size 1200,480 dynamic font 'sans,10'\nset output 'traff.svg'\nset multiplot layout 1,2 "
     << "title 'Allreduce on " << study.options.nodes << " x " << study.options.ranks_per_node
     << " ranks (simulated)'\nset logscale xy\nset xlabel 'MPI_INT elements per rank'\nset ylabel 'time (us)'\n"
     << "set grid\nset key top left font ',9'\nplot 'traff.dat' using 1:2 with linespoints title 'native (best of "
        "three)', '' using 1:3 with linespoints title 'reduce+bcast', '' using 1:4 with linespoints title 'tree "
        "(paper blocks)', '' using 1:5 with linespoints title 'dual (paper blocks)', '' using 1:6 with linespoints "
        "title 'tree (auto)', '' using 1:7 with linespoints title 'dual (auto)'\n"
     << "unset logscale y\nset ylabel 'tree / dual'\nset key bottom right\nplot 4.0/3 with lines dt 2 lc rgb 'gray' "
        "title '4/3', 'traff.dat' using 1:8 with linespoints title 'paper blocks', '' using 1:9 with linespoints "
        "title 'auto blocks'\nunset multiplot\n";
  return render_gnuplot(dir, "traff", data.str(), gp.str());
}

}  // namespace copse
