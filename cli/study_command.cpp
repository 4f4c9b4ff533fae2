// copse study proficz: Proficz 2018's benchmark (his Fig. 9) on the emulated
// cluster, in virtual time: one rank late by a range of delays (Fig. 10,
// Table 3), a range of sizes at one delay (Fig. 11), and the arrival-aware
// algorithms planned from wrong predictions. Prints the tables and writes
// the data, a gnuplot script and, when gnuplot is installed, an SVG plot.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "cli/study_runs.hpp"
#include "common/units.hpp"
#include "tools/experiment.hpp"

namespace copse {
namespace {

struct StudyArgs {
  int ranks = 16;
  std::string bytes = "4MiB";
  std::string alpha, beta, gamma;
  std::string out = "study-proficz";
  bool json = false;
};

std::string speedup(Picos ring, Picos mine) {
  std::ostringstream o;
  o.precision(2);
  o << std::fixed << (mine > 0 ? static_cast<double>(ring) / static_cast<double>(mine) : 0.0) << "x";
  return o.str();
}

std::string us(Picos t) {
  std::ostringstream o;
  o.precision(1);
  o << std::fixed << to_seconds(t) * 1e6;
  return o.str();
}

// One table: a line per value of `part`'s parameter, a cell per algorithm:
// the time after the late arrival (us) and its speedup over the ring, then
// the speedup of the mean elapsed time.
void print_table(const ProficzStudy& study, const std::string& part, const std::string& heading,
                 const std::function<std::string(const ProficzRow&)>& key) {
  std::vector<std::string> names, keys;
  for (const auto& r : study.rows) {
    if (r.part != part) continue;
    if (std::find(names.begin(), names.end(), r.algorithm) == names.end()) names.push_back(r.algorithm);
    if (std::find(keys.begin(), keys.end(), key(r)) == keys.end()) keys.push_back(key(r));
  }
  std::cout << "\n" << heading << "\n" << pad("", 16);
  for (const auto& n : names) std::cout << pad(n, 28);
  std::cout << "\n";
  for (const auto& k : keys) {
    std::cout << pad(k, 16);
    for (const auto& n : names)
      for (const auto& r : study.rows)
        if (r.part == part && r.algorithm == n && key(r) == k)
          std::cout << pad(us(r.measures.after_last_arrival) + " " +
                               speedup(r.ring.after_last_arrival, r.measures.after_last_arrival) + " " +
                               speedup(r.ring.mean_elapsed, r.measures.mean_elapsed) + (r.ok ? "" : " FAILED"),
                           28);
    std::cout << "\n";
  }
}

// A data file for gnuplot: x, then per algorithm the two speedups.
void write_data(const std::filesystem::path& file, const ProficzStudy& study, const std::string& part,
                const std::vector<std::string>& names, const std::function<double(const ProficzRow&)>& x) {
  std::ofstream out(file);
  out << "# x";
  for (const auto& n : names) out << "  " << n << "_after " << n << "_mean";
  out << "\n";
  std::vector<double> xs;
  for (const auto& r : study.rows)
    if (r.part == part && std::find(xs.begin(), xs.end(), x(r)) == xs.end()) xs.push_back(x(r));
  for (double v : xs) {
    out << v;
    for (const auto& n : names)
      for (const auto& r : study.rows)
        if (r.part == part && r.algorithm == n && x(r) == v)
          out << " "
              << static_cast<double>(r.ring.after_last_arrival) / static_cast<double>(r.measures.after_last_arrival)
              << " " << static_cast<double>(r.ring.mean_elapsed) / static_cast<double>(r.measures.mean_elapsed);
    out << "\n";
  }
  if (!out) throw SystemError("cannot write " + file.string());
}

std::string plot_script(const std::vector<std::string>& names, const std::vector<std::string>& aware, int ranks,
                        const std::string& bytes) {
  std::ostringstream g;
  // `columns`: the algorithms in the file, in order (write_data's columns).
  // One colour per algorithm; solid: after the late arrival, dotted: mean elapsed.
  auto lines = [&](const std::string& file, const std::vector<std::string>& columns,
                   const std::vector<std::string>& who, bool log_x) {
    std::string s = "plot 1 with lines lc rgb 'gray' dt 2 title 'ring'";
    for (const auto& n : who) {
      const auto it = std::find(columns.begin(), columns.end(), n);
      const long col = 2 + 2 * (it - columns.begin());
      const std::string colour =
          " lc " + std::to_string(1 + (std::find(names.begin(), names.end(), n) - names.begin()));
      // x = 0 (balanced) has no place on a log scale: it is in the table.
      const std::string x = log_x ? "($1 > 0 ? $1 : 1/0):" : "1:";
      s += ", '" + file + "' using " + x + std::to_string(col) + " with linespoints lw 2 pt 7" + colour + " title '" +
           n + " (after)'";
      s += ", '" + file + "' using " + x + std::to_string(col + 1) + " with linespoints dt 3 pt 6" + colour +
           " title '" + n + " (mean)'";
    }
    return s + "\n";
  };
  std::vector<std::string> others;
  for (const auto& n : names)
    if (n != "ring") others.push_back(n);
  g << "# Proficz 2018, Fig. 10 and 11, on the copse emulator (gnuplot proficz.gp)\n"
    << "set terminal svg size 1350,430 dynamic font 'sans,11'\n"
    << "set output 'proficz.svg'\n"
    << "set multiplot layout 1,3 title 'Allreduce with rank 1 late, " << ranks << " nodes: speedup over the ring "
    << "(after the late arrival, and of the mean elapsed time)'\n"
    << "set ylabel 'speedup over ring'\nset grid\nset key bottom right font ',9' opaque\n"
    << "set logscale x\nset xlabel 'delay / balanced ring time (" << bytes << ")'\n"
    << lines("proficz_delay.dat", names, others, true) << "set key center right\nset xlabel 'bytes per rank (MiB)'\n"
    << lines("proficz_size.dat", names, others, true)
    << "unset logscale x\nset key top right\nset xlabel 'prediction error / delay (absolute)'\n"
    << lines("proficz_error.dat", aware, aware, false) << "unset multiplot\n";
  return g.str();
}

int run_study(const StudyArgs& args) {
  require_at_least("--ranks", args.ranks, 2);
  ProficzStudyOptions o;
  o.ranks = args.ranks;
  o.bytes = size_option("--bytes", args.bytes);
  if (o.bytes % 4 != 0 || o.bytes == 0) throw UsageError("--bytes: a positive whole number of floats (4 bytes)");
  o.model = CostModel::uniform({time_option("--alpha", args.alpha), time_option("--beta", args.beta)},
                               time_option("--gamma", args.gamma), Ports::bidirectional);
  ProficzStudy study;
  {
    // Proficz's runs report nothing as they go: the line says how long it has been.
    ProgressLine progress("copse study proficz", args.json);
    progress.phase("emulating the runs");
    study = run_proficz_study(o);
  }
  bool ok = true;
  for (const auto& r : study.rows) ok = ok && r.ok;

  const std::filesystem::path dir = args.out;
  std::filesystem::create_directories(dir);
  std::vector<std::string> names = o.algorithms, aware;
  for (const auto& n : names)
    if (find_algorithm(Collective::allreduce, n).arrival_aware) aware.push_back(n);
  const auto in_rings = [&](const ProficzRow& r) {
    return static_cast<double>(r.delay) / static_cast<double>(study.balanced_ring);
  };
  write_data(dir / "proficz_delay.dat", study, "delay", names, in_rings);
  write_data(dir / "proficz_size.dat", study, "size", names,
             [](const ProficzRow& r) { return static_cast<double>(r.bytes) / (1 << 20); });
  write_data(dir / "proficz_error.dat", study, "error", aware, [](const ProficzRow& r) { return r.error; });
  std::ofstream(dir / "proficz.gp") << plot_script(names, aware, o.ranks, format_bytes(o.bytes));
  const bool have_gnuplot = std::system("command -v gnuplot > /dev/null 2>&1") == 0;
  const bool plotted = have_gnuplot && std::system(("cd '" + dir.string() + "' && gnuplot proficz.gp").c_str()) == 0;

  if (args.json) {
    Json rows = Json::array();
    for (const auto& r : study.rows)
      rows.push_back({{"part", r.part},
                      {"algorithm", r.algorithm},
                      {"bytes", r.bytes},
                      {"delay_ps", r.delay},
                      {"prediction_error", r.error},
                      {"blocks", r.blocks},
                      {"after_last_arrival_ps", r.measures.after_last_arrival},
                      {"mean_elapsed_ps", r.measures.mean_elapsed},
                      {"ring_after_last_arrival_ps", r.ring.after_last_arrival},
                      {"ring_mean_elapsed_ps", r.ring.mean_elapsed},
                      {"ok", r.ok}});
    std::cout << Json{{"ranks", o.ranks},
                      {"bytes", o.bytes},
                      {"balanced_ring_ps", study.balanced_ring},
                      {"rows", rows},
                      {"plot", plotted ? (dir / "proficz.svg").string() : ""}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "Proficz 2018 on the emulator: allreduce of float sums, " << o.ranks << " nodes x 1 rank, rank 1 "
              << "late (one-late), each algorithm at its best block count for the pattern; virtual time under "
              << "alpha " << format_time(o.model.level(1).alpha) << ", beta " << format_time(o.model.level(1).beta)
              << "/B, gamma " << format_time(o.model.gamma()) << "/B.\n"
              << "Each cell: the time after the late rank arrives (us), its speedup over the ring, and the speedup "
              << "of the mean elapsed time (Proficz's e-bar).\n"
              << "The balanced ring at " << format_bytes(o.bytes) << " takes "
              << format_time(to_seconds(study.balanced_ring)) << ": the unit of the delays.\n";
    print_table(study, "delay", "Delay of rank 1 (Fig. 10, Table 3), " + format_bytes(o.bytes) + " per rank:",
                [&](const ProficzRow& r) {
                  std::ostringstream k;
                  k << in_rings(r) << "x (" << format_time(to_seconds(r.delay)) << ")";
                  return k.str();
                });
    print_table(study, "size",
                "Size (Fig. 11), rank 1 late by " + std::to_string(o.size_delay).substr(0, 4) + "x the balanced ring:",
                [](const ProficzRow& r) { return format_bytes(r.bytes); });
    print_table(study, "error",
                "Wrong predictions, " + format_bytes(o.bytes) + ", the same delay: absolute error (x the delay):",
                [](const ProficzRow& r) {
                  std::ostringstream k;
                  k << r.error;
                  return k.str();
                });
    std::cout << "\nWrote " << (dir / "proficz_{delay,size,error}.dat").string() << " and "
              << (dir / "proficz.gp").string();
    if (plotted)
      std::cout << "; the plot is " << (dir / "proficz.svg").string() << "\n";
    else
      std::cout << "; " << (have_gnuplot ? "gnuplot failed" : "gnuplot is not installed (Debian: gnuplot-nox)")
                << ", so there is no plot\n";
  }
  if (!ok) throw RunFailure("a run of the study gave a wrong result or a virtual time unlike the simulator's");
  return 0;
}

}  // namespace

void add_study_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<StudyArgs>();
  const ModelOptions& m = config.options().model;
  args->alpha = exact_time_text(m.inter_alpha);
  args->beta = exact_time_text(m.inter_beta);
  args->gamma = exact_time_text(m.gamma);
  auto* study = app.add_subcommand(
      "study", "reproduce a paper's study on the emulator or the simulator: a table, --json and an SVG plot (gnuplot)");
  study->require_subcommand(1);
  study->footer(std::string("Each study writes its data, a gnuplot script and the plot into --out DIR.\n") +
                kProgressHelp);
  auto* command = study->add_subcommand(
      "proficz", "Proficz 2018: allreduce with one late rank -- ring, Rabenseifner, SLT and PRR (tables and a plot)");
  command->add_option("--ranks", args->ranks, "emulated nodes, one rank each")->type_name("P")->capture_default_str();
  command->add_option("--bytes", args->bytes, "bytes of float per rank for the delay sweep")
      ->type_name("SIZE")
      ->capture_default_str();
  command->add_option("--alpha", args->alpha, "per-message latency between nodes")
      ->type_name("TIME")
      ->capture_default_str();
  command->add_option("--beta", args->beta, "per-byte time between nodes")->type_name("TIME")->capture_default_str();
  command->add_option("--gamma", args->gamma, "time per combined byte")->type_name("TIME")->capture_default_str();
  command->add_option("--out", args->out, "directory for the data, the gnuplot script and the plot")
      ->type_name("DIR")
      ->capture_default_str();
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print the rows as JSON");
  command->callback([args, &run_parsed] { run_parsed = [args] { return run_study(*args); }; });
  add_depth_study(study, config, run_parsed);
  add_bjorndalen_study(study, run_parsed);
  add_flat_hier_study(study, config, run_parsed);
  add_traff_study(study, config, run_parsed);
}

}  // namespace copse
