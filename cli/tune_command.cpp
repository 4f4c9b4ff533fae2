// copse tune: measures copse against the MPI library under mpirun and writes
// the decision table (config/decision_table.hpp) that gives each call to the
// faster (issue 18, item 1): cli/tune_run.hpp measures, config/tune.hpp
// makes the rows, write_decision_table writes them. With --from CSV it only
// makes the rows, from measurements made before.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string_view>

#include "cli/options.hpp"
#include "cli/tune_run.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

// Where `cmake --install` puts libcopse_mpi.so and mpi_collectives under the
// prefix (CMakeLists.txt defines both).
#ifndef COPSE_INSTALL_LIBDIR
#define COPSE_INSTALL_LIBDIR "lib"
#define COPSE_INSTALL_LIBEXECDIR "libexec/copse"
#endif

namespace copse {
namespace {

struct TuneArgs {
  std::string out = "copse-table.toml";
  std::string shapes = "np2,np4,np4-vn2";
  std::string sizes = "8,32,128,512,2KiB,8KiB,32KiB,128KiB,512KiB,2MiB,8MiB,16MiB";
  std::string forms = "blocking,nonblocking";
  std::string sync = "p2p";
  std::string hierarchy_forms = "lanes,auto";
  std::string block_counts = "4,16,64";
  std::string block_counts_from = "256KiB";
  int rounds = 2;
  bool paired = false;
  int refine = 1;
  double threshold = 0.95;
  double noise = 0.8;
  double unmeasured = kTuneUnmeasured;
  std::vector<std::string> from;
  bool replace = false;
  std::string mpirun = "mpirun", host, hostfile, bench, library, work;
  int timeout = 1800;
};

// This process's command line, for the table's header.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> words;
  for (std::string word; std::getline(in, word, '\0');) words.push_back(word);
  return words.empty() ? "copse tune" : join(words, " ");
}

std::string now_text(const char* format) {
  const std::time_t t = std::time(nullptr);
  char text[64];
  std::strftime(text, sizeof text, format, std::gmtime(&t));
  return text;
}

// The provenance lines of an existing table's header, by shape: its
// leading comment lines "# measured SHAPE: ..." (what run_tune writes per
// shape, with anything a person added to the line), so that a merge keeps
// where the rows of the shapes it does not measure came from.
std::map<std::string, std::string> provenance_lines(const std::string& path) {
  std::map<std::string, std::string> lines;
  std::ifstream in(path);
  constexpr std::string_view prefix = "# measured ";
  for (std::string line; std::getline(in, line) && (line.empty() || line[0] == '#');) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::size_t colon = line.find(':', prefix.size());
    if (colon != std::string::npos) lines[line.substr(prefix.size(), colon - prefix.size())] = line.substr(2);
  }
  return lines;
}

// What of this process's environment shapes the runs it launches, for the
// provenance lines: Open MPI's parameters (OMPI_MCA_*) and the multi-host
// launcher's settings (MH_*, tests/multihost/mh-mpirun.sh), sorted, values
// with spaces quoted: `MH_CPUS="h1=0 h2=1" MH_HOSTS="h1:2 h2:2"`; "" for none.
std::string launch_environment() {
  std::vector<std::string> set;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const std::size_t equals = entry.find('=');
    if (equals == std::string_view::npos || !(entry.starts_with("OMPI_MCA_") || entry.starts_with("MH_"))) continue;
    const std::string_view value = entry.substr(equals + 1);
    const bool quote = value.empty() || value.find_first_of(" \t\"'") != std::string_view::npos;
    set.push_back(std::string(entry.substr(0, equals + 1)) + (quote ? json_string(value) : std::string(value)));
  }
  std::sort(set.begin(), set.end());
  return join(set, " ");
}

// The pieces of a list given with commas or spaces.
std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> items;
  for (const std::string& piece : split(text, ','))
    for (const std::string& item : split(piece, ' '))
      if (!item.empty()) items.push_back(item);
  return items;
}

TuneMeasurement measurement(const TuneArgs& a) {
  TuneMeasurement m;
  for (const std::string& name : list_items(a.shapes)) {
    m.shapes.push_back(option_value("--shapes", [&] { return parse_tune_shape(name); }));
    if (m.shapes.back().hosts > 1 && a.host.empty() && a.hostfile.empty() && a.mpirun == "mpirun")
      throw UsageError("--shapes: " + name + " runs on " + std::to_string(m.shapes.back().hosts) +
                       " hosts: name them with --host or --hostfile, or give a launcher with --mpirun");
  }
  if (m.shapes.empty()) throw UsageError("--shapes: no shape given");
  // The benchmark reads sizes its own way: it gets whole bytes.
  std::vector<std::string> bytes;
  for (const std::string& item : list_items(a.sizes)) {
    const std::uint64_t n = size_option("--sizes", item);
    if (n == 0 || n % 4) throw UsageError("--sizes: " + item + " is not a positive multiple of 4 bytes (floats)");
    bytes.push_back(std::to_string(n));
  }
  if (bytes.empty()) throw UsageError("--sizes: no size given");
  m.sizes = join(bytes, ",");
  std::vector<std::string> forms;
  for (const std::string& item : list_items(a.forms)) {
    if (!call_form_named(item))
      throw UsageError("--forms: '" + item + "' is not a form (blocking, nonblocking or persistent)");
    if (std::find(forms.begin(), forms.end(), item) == forms.end()) forms.push_back(item);
  }
  if (forms.empty()) throw UsageError("--forms: no form given");
  m.forms = join(forms, ",");
  if (a.sync != "barrier" && a.sync != "p2p") throw UsageError("--sync: '" + a.sync + "' is not barrier or p2p");
  m.sync = a.sync;
  if (a.hierarchy_forms != "none")
    for (const std::string& item : list_items(a.hierarchy_forms)) {
      const Form form = option_value("--hierarchy-forms", [&] { return parse_form(item); });
      if (std::find(m.hierarchy_forms.begin(), m.hierarchy_forms.end(), form) == m.hierarchy_forms.end())
        m.hierarchy_forms.push_back(form);
    }
  if (a.block_counts != "none")
    for (const std::string& item : list_items(a.block_counts)) {
      const int blocks = *blocks_option(item, false, "--block-counts");
      if (blocks > 1 << 20) throw UsageError("--block-counts: " + item + " is more than 1048576 blocks");
      if (std::find(m.block_counts.begin(), m.block_counts.end(), blocks) == m.block_counts.end())
        m.block_counts.push_back(blocks);
    }
  m.block_counts_from = size_option("--block-counts-from", a.block_counts_from);
  require_at_least("--rounds", a.rounds, 1);
  m.rounds = a.rounds;
  m.paired = a.paired;
  require_at_least("--refine", a.refine, 0);
  require_at_least("--timeout", a.timeout, 1);
  m.timeout_seconds = a.timeout;
  if (!a.host.empty()) m.launcher_args.insert(m.launcher_args.end(), {"--host", a.host});
  if (!a.hostfile.empty()) m.launcher_args.insert(m.launcher_args.end(), {"--hostfile", a.hostfile});
  const std::filesystem::path out(a.out);
  m.work = a.work.empty() ? (out.parent_path() / (out.stem().string() + "-runs") / now_text("%Y%m%d-%H%M%S")).string()
                          : a.work;
  return m;
}

// The variants copse is measured in besides its configuration: "lanes,
// auto; 4, 16, 64 blocks from 256 KiB" ("" for none).
std::string variants_text(const TuneMeasurement& m) {
  std::vector<std::string> names, counts;
  for (Form form : m.hierarchy_forms) names.emplace_back(to_string(form));
  if (measures_block_counts(m))
    for (int blocks : m.block_counts) counts.push_back(std::to_string(blocks));
  std::string text = join(names, ", ");
  if (!counts.empty())
    text += (text.empty() ? "" : "; ") + join(counts, ", ") + " blocks from " + format_bytes(m.block_counts_from);
  return text;
}

TuneRatios read_measurements(const std::string& csv) {
  std::ifstream in(csv);
  if (!in) throw UsageError("cannot read measurements " + csv);
  return read_tune_csv(in, csv);
}

// --refine: up to a.refine more passes, each measuring the sizes between two
// neighbours that decide differently (tune_refinements), shape by shape, into
// `ratios`; each pass's pooled CSV is added to `files`.
void refine(const TunePrograms& programs, const TuneMeasurement& m, const TuneArgs& a, TuneRatios& ratios,
            std::vector<std::string>& files, const std::function<void(const std::string&)>& say) {
  for (int pass = 1; pass <= a.refine; ++pass) {
    const auto wanted = tune_refinements(ratios, a.threshold);
    if (wanted.empty()) return;
    for (const TuneShape& shape : m.shapes) {
      const auto it = wanted.find(shape.name);
      if (it == wanted.end()) continue;
      TuneMeasurement more = m;
      more.shapes = {shape};
      std::vector<std::string> sizes, collectives;
      for (const std::uint64_t bytes : it->second.sizes) sizes.push_back(std::to_string(bytes));
      for (const MpiCollective c : it->second.collectives) collectives.emplace_back(to_string(c));
      more.sizes = join(sizes, ",");
      more.collectives = join(collectives, ",");
      more.work = (std::filesystem::path(m.work) / ("refine-" + std::to_string(pass) + "-" + shape.name)).string();
      say("refining " + shape.name + " (pass " + std::to_string(pass) + "): " + more.collectives + " at " + more.sizes +
          " B");
      files.push_back(measure_for_tune(programs, more, say));
      merge_tune_ratios(ratios, read_measurements(files.back()));
    }
  }
}

int run_tune(const TuneArgs& a) {
  if (!(a.threshold > 0)) throw UsageError("--threshold: expected a ratio above 0, got " + std::to_string(a.threshold));
  if (!(a.noise > 0 && a.noise <= 1))
    throw UsageError("--noise: expected a ratio in (0, 1], got " + std::to_string(a.noise));
  if (!(a.unmeasured > 0 && a.unmeasured <= 1))
    throw UsageError("--unmeasured: expected a ratio in (0, 1], got " + std::to_string(a.unmeasured));
  // Everything that can be wrong with the input is found before measuring.
  std::optional<DecisionTable> previous;
  if (!a.replace && std::filesystem::exists(a.out)) previous = load_decision_table(a.out);
  TuneRatios ratios;
  std::optional<TuneMeasurement> measured;  // none: --from
  if (a.from.empty()) {
    const TuneMeasurement& m = measured.emplace(measurement(a));
    std::error_code error;
    const TunePrograms programs =
        locate_tune_programs(std::filesystem::read_symlink("/proc/self/exe", error).string(), a.mpirun, a.bench,
                             a.library, {COPSE_INSTALL_LIBDIR, COPSE_INSTALL_LIBEXECDIR});
    const bool several =
        std::any_of(m.shapes.begin(), m.shapes.end(), [](const TuneShape& s) { return s.multi_node(); });
    const std::string variants = variants_text(m);
    std::cout << "copse tune: " << m.shapes.size() << " shape(s), " << m.rounds
              << (m.paired ? " round(s) of copse with the MPI library's own calls interleaved"
                           : " round(s) of the MPI library and copse")
              << (several && !variants.empty() ? " (on several nodes also copse in " + variants + ")" : "")
              << " rotated; measurements in " << m.work << "\n"
              << std::flush;
    const auto say = [](const std::string& line) { std::cout << line << "\n" << std::flush; };
    std::vector<std::string> files = {measure_for_tune(programs, m, say)};
    merge_tune_ratios(ratios, read_measurements(files.back()));
    refine(programs, m, a, ratios, files, say);
    std::cout << "pooled measurements: " << join(files, " ") << " (copse tune --from reads them again)\n";
  }
  for (const std::string& csv : a.from) merge_tune_ratios(ratios, read_measurements(csv));
  DecisionTable table = tune_table(ratios, a.threshold, a.noise, previous, a.unmeasured);
  std::vector<std::string> kept;
  std::size_t unshaped = 0;  // rows by hand (or by scripts/decision-table.py): they decide first
  if (previous)
    for (const DecisionRow& r : table.rows) {
      unshaped += r.shape.empty();
      if (!r.shape.empty() && !ratios.contains(r.shape) && (kept.empty() || kept.back() != r.shape))
        kept.push_back(r.shape);
    }
  std::vector<std::string> shapes;  // measured by this run
  for (const auto& [shape, by_collective] : ratios) shapes.push_back(shape);
  const std::string command = command_line();
  char threshold[32], noise[32], unmeasured[32];
  std::snprintf(threshold, sizeof threshold, "%g", a.threshold);
  std::snprintf(noise, sizeof noise, "%g", a.noise);
  std::snprintf(unmeasured, sizeof unmeasured, "%g", a.threshold * a.unmeasured);
  std::string header =
      "copse's decision table (config/decision_table.hpp), written by copse tune\n" + command + " (" +
      now_text("%Y-%m-%d") + ")\ncopse serves a call where tuned/copse by median >= " + threshold +
      " at the nearest measured\nshape and size (a lone size within the noise, " + noise +
      ", of that follows its two\nneighbours when they agree); the MPI library serves the rest. Rows are by call\n"
      "form; a nonblocking or persistent form not measured follows nonblocking's\n(persistent) or "
      "the blocking call's ratios with copse from " +
      unmeasured +
      " (the library's\nnonblocking path is other code than its blocking one). On several nodes a row\n"
      "names copse's hierarchy form or block count where one measured beat the\nconfigured plan by more than "
      "the noise. "
      "Each row's note gives the ratios it stands for.";
  if (!kept.empty())
    header +=
        "\nThe threshold and noise above are this run's; a shape kept from an earlier\nrun follows the rules "
        "of the command its line gives.";
  // What a shape measured now ran with, defaults included (nothing for --from).
  const auto ran_with = [&](const std::string& shape) -> std::string {
    if (!measured) return "";
    std::string text = " (line-up " + measured->sync + (measured->paired ? ", paired" : "");
    if (parse_tune_shape(shape).multi_node()) {
      const std::string variants = variants_text(*measured);
      text += "; copse in its configured form" + (variants.empty() ? "" : ", " + variants);
    }
    if (const std::string environment = launch_environment(); !environment.empty()) text += "; with " + environment;
    return text + ")";
  };
  // Where each shape's rows come from: this run for the shapes it measured,
  // the earlier table's own line for each shape it keeps.
  for (const std::string& shape : shapes)
    header += "\nmeasured " + shape + ": " + now_text("%Y-%m-%d %H:%M UTC") + ", " + command + ran_with(shape);
  if (!kept.empty()) {
    const std::map<std::string, std::string> earlier = provenance_lines(a.out);
    for (const std::string& shape : kept)
      if (const auto it = earlier.find(shape); it != earlier.end()) header += "\n" + it->second;
    header += "\nShapes kept from the earlier table (measured before): " + join(kept, ", ") + ".";
  }
  const std::string text = write_decision_table(table, header);
  parse_decision_table(text, a.out);  // what is written reads back
  const std::string temporary = a.out + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!(file << text) || !file.flush()) throw SystemError("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, a.out);
  std::size_t served = 0;
  for (const DecisionRow& r : table.rows) served += r.use == Provider::copse;
  std::cout << "decision table: " << a.out << ": " << table.rows.size() << " rows (" << served
            << " give calls to copse, " << table.rows.size() - served << " to the MPI library); measured shapes "
            << join(shapes, ", ") << (kept.empty() ? "" : "; kept " + join(kept, ", "))
            << "\nuse it with COPSE_MPI_TABLE=" << a.out << " (check it with: COPSE_MPI_TABLE=" << a.out
            << " copse config)\n";
  if (unshaped)
    std::cout << "note: the " << unshaped << " row(s) of " << a.out
              << " without a shape (written by hand, or before copse tune) were kept first: they decide before "
                 "the measured rows (--replace drops them)\n";
  return 0;
}

// What `copse tune --help` says last: how a measurement becomes rows.
constexpr const char* kTuneFooter =
    "Each shape runs bench's mpi_collectives under mpirun on the MPI library alone and with "
    "LD_PRELOAD=libcopse_mpi.so (COPSE_MPI_TABLE=none: copse serves every call; on several nodes once more per "
    "--hierarchy-forms form and per --block-counts count), --rounds times each (--paired: the library's calls "
    "within copse's runs); the rounds "
    "are pooled, and copse gets a collective's size band where it was at least --threshold as fast by median (a lone "
    "band within --noise of it follows its two neighbours when they agree). A "
    "measured size decides up to the geometric mean with the next, and each --refine pass measures that mean where "
    "the two decide differently; a one-node shape npP covers P ranks up to the "
    "next measured P, the multi-node ones every communicator of two or more nodes likewise; barrier by the median "
    "of its ratios; reduce_scatter repeats reduce_scatter_block's rows. Rows are by call form (--forms); a "
    "persistent form not measured repeats nonblocking's rows, a nonblocking one (or persistent without "
    "nonblocking) the blocking call's at threshold*--unmeasured. Calls no row matches go to the MPI library. "
    "Rules and format: README, 'The decision table'. Exit status: 0 written; 1 a run failed or verified wrong; 2 "
    "bad input (file, line and reason).";

}  // namespace

void add_tune_command(CLI::App& app, const Config&, RunParsed& run_parsed) {
  auto a = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand("tune",
                                 "measure copse against the MPI library under mpirun and write the decision table "
                                 "that gives each call to the faster (mpi.table)");
  cmd->add_option("--out", a->out,
                  "the table to write; an existing one is merged: a shape measured again replaces "
                  "its rows, the others stay")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_flag("--replace", a->replace, "write the table anew instead of merging with an existing --out");
  cmd->add_option("--shapes", a->shapes,
                  "communicator shapes to measure: npP (P processes on one node), npP-vnK (on virtual nodes of K "
                  "ranks), npP-hN (on N hosts: give --host, --hostfile or --mpirun)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--sizes", a->sizes, "bytes per process to measure (multiples of 4)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--forms", a->forms,
                  "call forms to measure: blocking (MPI_Allreduce), nonblocking (MPI_Iallreduce + MPI_Wait), "
                  "persistent (MPIX_Allreduce_init once, then MPI_Start + MPI_Wait; only where the MPI library has "
                  "them). Each form adds a measurement as long as the blocking one; persistent is left out by "
                  "default because its rows follow nonblocking's when not measured (both sides' persistent calls "
                  "are their nonblocking schedules made once)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--sync", a->sync,
                  "how the ranks line up before each timed call: p2p, a dissemination barrier of point-to-point "
                  "messages, the same on both sides; or barrier, MPI_Barrier -- copse's own on its side, whose exit "
                  "order moves time into or out of the call timed after it (a bcast from rank 0 across three hosts: "
                  "43 against 20 us, level with p2p)")
      ->type_name("barrier|p2p")
      ->capture_default_str();
  cmd->add_option("--hierarchy-forms", a->hierarchy_forms,
                  "on shapes of several nodes (npP-vnK, npP-hN) copse is also measured planning in each of these "
                  "forms (flat, leader, multi-leader, lanes, auto; none), and a size where one beats the configured "
                  "form by more than --noise gets a row naming it: across two hosts a bcast of 64 KiB-1 MiB took "
                  "36-582 us in lanes, 106-1211 in the leader form. Each adds a measurement as long as copse's")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--block-counts", a->block_counts,
                  "on shapes of several nodes, copse is also measured in its configured form with each of these "
                  "pipeline block counts (none: only its model's choice) at the sizes from --block-counts-from, and "
                  "a size where one beats the configured plan by more than --noise gets a row naming it (across two "
                  "hosts a 1 MiB reduce took 0.63 ms in 4 blocks, 1.3 in the model's 1)")
      ->type_name("LIST")
      ->capture_default_str();
  cmd->add_option("--block-counts-from", a->block_counts_from, "the smallest size --block-counts measure")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--rounds", a->rounds, "rounds per shape, the sides' order rotating")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_flag("--paired", a->paired,
                "time the MPI library's own calls (PMPI_) within copse's runs, call by call interleaved with "
                "copse's, instead of in runs of their own: both sides of a ratio meet the same launch (on this "
                "VM copse's copies through shared memory ran 2-4x faster or slower from launch to launch, Open "
                "MPI's not, and runs of their own compared such launches)");
  cmd->add_option("--refine", a->refine,
                  "passes that measure, where two neighbouring sizes decide differently, the size between "
                  "them, moving the edge closer to where copse and the library cross (0: none)")
      ->type_name("N")
      ->capture_default_str();
  cmd->add_option("--threshold", a->threshold,
                  "copse serves where tuned/copse by median is at least this (within noise: no slower)")
      ->type_name("R")
      ->capture_default_str();
  cmd->add_option("--noise", a->noise,
                  "a size band within threshold*R .. threshold/R whose two neighbours decide alike follows them "
                  "(1: off)")
      ->type_name("R")
      ->capture_default_str();
  cmd->add_option("--unmeasured", a->unmeasured,
                  "a nonblocking form not measured (and persistent without nonblocking) follows the blocking "
                  "call's ratios with copse serving from threshold*R: the library's nonblocking path is other, "
                  "slower code than its blocking call (Open MPI's libnbc: 1.4-1.85x tuned at np 2, 8 B-2 KiB)")
      ->type_name("R")
      ->capture_default_str();
  cmd->add_option("--from", a->from,
                  "make the table from these pooled measurements (pooled.csv of an earlier run, "
                  "or scripts/bench-mpi.sh's CSV made with COPSE_MPI_TABLE=none) instead of measuring; a size in "
                  "several files: the last one's")
      ->type_name("CSV")
      ->excludes(cmd->get_option("--shapes"))
      ->excludes(cmd->get_option("--sizes"))
      ->excludes(cmd->get_option("--rounds"))
      ->excludes(cmd->get_option("--refine"))
      ->excludes(cmd->get_option("--forms"))
      ->excludes(cmd->get_option("--sync"))
      ->excludes(cmd->get_option("--paired"))
      ->excludes(cmd->get_option("--hierarchy-forms"))
      ->excludes(cmd->get_option("--block-counts"))
      ->excludes(cmd->get_option("--block-counts-from"));
  cmd->add_option("--mpirun", a->mpirun, "the launcher, with words of its own (it takes -np, -x and --mca)")
      ->type_name("COMMAND")
      ->capture_default_str();
  cmd->add_option("--host", a->host, "given to mpirun as --host")->type_name("LIST");
  cmd->add_option("--hostfile", a->hostfile, "given to mpirun as --hostfile")->type_name("FILE");
  cmd->add_option("--bench", a->bench,
                  "the benchmark (default: mpi_collectives beside copse, or in PREFIX/" COPSE_INSTALL_LIBEXECDIR ")")
      ->type_name("FILE");
  cmd->add_option("--library", a->library,
                  "the interposer (default: libcopse_mpi.so beside copse, or in PREFIX/" COPSE_INSTALL_LIBDIR ")")
      ->type_name("FILE");
  cmd->add_option("--work", a->work, "where the measurements go (default: FILE's stem + -runs/DATE-TIME beside it)")
      ->type_name("DIR");
  cmd->add_option("--timeout", a->timeout, "seconds one mpirun may take before it is stopped and the tune fails")
      ->type_name("SECONDS")
      ->capture_default_str();
  cmd->footer(kTuneFooter);
  cmd->callback([a, &run_parsed] { run_parsed = [a] { return run_tune(*a); }; });
}

}  // namespace copse
