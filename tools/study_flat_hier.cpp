#include "tools/study_flat_hier.hpp"

#include <sstream>

#include "common/error.hpp"
#include "common/units.hpp"

namespace copse {

std::vector<HierarchyForm> default_flat_hier_forms() {
  std::vector<HierarchyForm> forms;
  for (const char* text :
       {"flat:ring", "flat:rabenseifner", "flat:recursive-doubling", "flat:two-tree", "flat:dual-root", "leader:ring:4",
        "leader:rabenseifner:4", "leader:dual-root:4", "leader:two-tree:4", "leader:rabenseifner",
        "multi-leader:rabenseifner:4", "multi-leader:dual-root:4", "lanes:rabenseifner", "lanes:ring",
        "lanes:dual-root", "lanes:recursive-doubling"})
    forms.push_back(parse_flat_hier_form(text));
  return forms;
}

HierarchyForm parse_flat_hier_form(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return UsageError("form '" + std::string(text) + "': " + why +
                      " (expected SHAPE:ALGORITHM[:GROUP], e.g. flat:ring, leader:rabenseifner:4, lanes:ring)");
  };
  const auto first = text.find(':');
  if (first == std::string_view::npos) throw bad("no algorithm");
  const auto second = text.find(':', first + 1);
  HierarchyForm form;
  form.shape = parse_form(text.substr(0, first));
  if (form.shape == Form::automatic) throw bad("auto is not a form the study compares");
  form.algorithm = std::string(text.substr(first + 1, second == std::string_view::npos ? second : second - first - 1));
  const AlgorithmInfo& algorithm = find_algorithm(Collective::allreduce, form.algorithm);
  if (!takes_form(algorithm, form.shape))
    throw bad(form.algorithm + " does not run in the " + std::string(to_string(form.shape)) + " form");
  form.group = 0;
  if (second != std::string_view::npos) {
    if (form.shape == Form::flat || form.shape == Form::lanes) throw bad("only leader forms take a group size");
    const std::string digits(text.substr(second + 1));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || std::stoi(digits) < 2)
      throw bad("the group size is a whole number >= 2");
    form.group = std::stoi(digits);
  }
  return form;
}

std::string flat_hier_form_name(const HierarchyForm& form) {
  return std::string(to_string(form.shape)) + ":" + form.algorithm +
         (form.group > 0 && form.shape != Form::flat && form.shape != Form::lanes ? ":" + std::to_string(form.group)
                                                                                  : "");
}

bool FlatHierStudy::ok() const {
  for (const auto& p : points)
    if (!p.ok) return false;
  return true;
}

namespace study_flat_hier {

void check_flat_hier_options(const FlatHierStudyOptions& o) {
  if (o.clusters.empty() || o.bytes.empty() || o.forms.empty())
    throw UsageError("the study needs clusters, sizes and forms");
  for (auto [n, k] : o.clusters)
    if (n < 1 || k < 1) throw UsageError("clusters: at least one node of one rank");
  for (std::uint64_t b : o.bytes)
    if (b == 0 || b % 4 != 0)
      throw UsageError("sizes: a positive whole number of int32 (4 bytes), got " + std::to_string(b));
}

// On the emulator when `p.emulated` (verified, virtual time = simulator's), else on the simulator.
void run_flat_hier_point(const FlatHierStudyOptions& o, FlatHierPoint& p) {
  const HierarchyForm& form = o.forms[p.form];
  const AlgorithmInfo& algo = find_algorithm(Collective::allreduce, form.algorithm);
  const std::uint64_t count = p.bytes / 4;
  ClusterSpec spec;
  spec.ranks_per_node.assign(static_cast<std::size_t>(p.nodes), p.per_node);
  spec.model = o.model;
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

// The best flat and the best hierarchical point of one cluster and size.
struct FlatHierBest {
  const FlatHierPoint *flat = nullptr, *hier = nullptr;
};
FlatHierBest best_of(const FlatHierStudy& study, int nodes, int per_node, std::uint64_t bytes) {
  FlatHierBest best;
  for (const auto& p : study.points) {
    if (p.nodes != nodes || p.per_node != per_node || p.bytes != bytes) continue;
    const FlatHierPoint*& slot = study.options.forms[p.form].shape == Form::flat ? best.flat : best.hier;
    if (!slot || p.time < slot->time) slot = &p;
  }
  return best;
}

}  // namespace study_flat_hier

FlatHierStudy run_flat_hier_study(const FlatHierStudyOptions& options, const ProgressCallback& progress) {
  study_flat_hier::check_flat_hier_options(options);
  FlatHierStudy study{options, {}};
  for (auto [n, k] : options.clusters)
    for (std::uint64_t b : options.bytes)
      for (std::size_t f = 0; f < options.forms.size(); ++f)
        study.points.push_back(FlatHierPoint{n, k, b, f, 0, 1, n * k <= options.emulate_up_to, true});
  // The simulated points in parallel; the emulated ones (threads of their own) one at a time.
  std::vector<std::size_t> simulated, emulated;
  for (std::size_t i = 0; i < study.points.size(); ++i) (study.points[i].emulated ? emulated : simulated).push_back(i);
  const std::uint64_t total = study.points.size();
  const ProgressCallback shifted = [&](std::uint64_t done, std::uint64_t) {
    if (progress) progress(emulated.size() + done, total);
  };
  for_each_point(
      emulated.size(), [&](std::size_t i) { study_flat_hier::run_flat_hier_point(options, study.points[emulated[i]]); },
      [&](std::uint64_t done, std::uint64_t) {
        if (progress) progress(done, total);
      },
      false);
  for_each_point(
      simulated.size(),
      [&](std::size_t i) { study_flat_hier::run_flat_hier_point(options, study.points[simulated[i]]); }, shifted);
  return study;
}

std::string flat_hier_tables(const FlatHierStudy& study) {
  std::ostringstream out;
  out << "Flat versus hierarchical allreduce (int32 sum): virtual time in us at the best block count; clusters of at "
         "most "
      << study.options.emulate_up_to << " ranks emulated (verified, = simulator), the others simulated.\n";
  for (auto [n, k] : study.options.clusters)
    for (std::uint64_t b : study.options.bytes) {
      out << "\n" << n << "x" << k << ", " << format_bytes(b) << " per rank:\n";
      for (const auto& p : study.points) {
        if (p.nodes != n || p.per_node != k || p.bytes != b) continue;
        out << "  " << study_pad(study.options.forms[p.form].label(), 48)
            << study_pad(study_us(to_seconds(p.time), 2), 12, true) << "  blocks "
            << study_pad(std::to_string(p.blocks), 4, true)
            << (p.emulated ? (p.ok ? "  emulated, ok" : "  emulated, FAILED") : "") << "\n";
      }
      const study_flat_hier::FlatHierBest best = study_flat_hier::best_of(study, n, k, b);
      if (!best.flat || !best.hier) continue;
      const double flat = to_seconds(best.flat->time), hier = to_seconds(best.hier->time);
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx", hier < flat ? flat / hier : hier / flat);
      out << "  best flat " << study.options.forms[best.flat->form].label() << " " << study_us(flat, 2)
          << " us, best hierarchical " << study.options.forms[best.hier->form].label() << " " << study_us(hier, 2)
          << " us: hierarchical " << ratio
          << (hier < flat   ? " faster"
              : hier > flat ? " slower"
                            : " (equal)")
          << "\n";
    }
  return out.str();
}

StudyPlot write_flat_hier_plot(const std::filesystem::path& dir, const FlatHierStudy& study) {
  std::ostringstream data;
  data << "# case best_flat_us best_hier_us (? = no form of that kind)\n";
  for (auto [n, k] : study.options.clusters)
    for (std::uint64_t b : study.options.bytes) {
      const study_flat_hier::FlatHierBest best = study_flat_hier::best_of(study, n, k, b);
      data << "\"" << n << "x" << k << " " << format_bytes(b) << "\" "
           << (best.flat ? study_us(to_seconds(best.flat->time), 3) : "?") << " "
           << (best.hier ? study_us(to_seconds(best.hier->time), 3) : "?") << "\n";
    }
  return render_gnuplot(dir, "flat_hier", data.str(),
                        "# Flat versus hierarchical (copse study flat-hier): gnuplot flat_hier.gp\n"
                        "set terminal svg size 900,500 dynamic font 'sans,10'\nset output 'flat_hier.svg'\n"
                        "set title 'Best flat vs best hierarchical allreduce'\nset datafile missing '?'\n"
                        "set style data histograms\nset style fill solid 0.8\nset logscale y\n"
                        "set ylabel 'virtual time (us)'\nset grid ytics\n"
                        "plot 'flat_hier.dat' using 2:xtic(1) title 'best flat', '' using 3 title "
                        "'best hierarchical'\n");
}

}  // namespace copse
