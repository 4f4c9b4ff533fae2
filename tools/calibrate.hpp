#pragma once
// `copse calibrate`: the cost model's figures (common/cost_model.hpp) measured
// on this machine, written as a configuration fragment ([model] keys) that
// everything reading the configuration uses -- `copse sim`/`emulate`
// `--config FILE`, the thread and MPI Teams, the autotuning of block counts.
//
// - alpha and beta per level: two ranks exchange messages over copse's own
//   links through the step executor (the path collectives take), so the
//   figures mean what the model means. On one node the ranks are threads
//   pinned to a pair of cores per level the machine has (sharing an L2, an
//   L3 but not an L2, a package but not an L3, different packages);
//   under mpirun (copse_calibrate_mpi) they are processes on virtual nodes
//   talking through the MPI link. Per size of a sweep (8 B up to
//   --max-bytes, powers of two) and repetition: a ping-pong (half a round
//   trip is the model's alpha + beta*n) and a stream (messages back to back
//   in one direction, per message). alpha and beta are fitted by least
//   squares on relative errors (every size counts alike, whatever its time)
//   over each size's fastest repetition (the least disturbed: on a shared
//   machine the others include other programs' time slices); their spread
//   is the fits of each repetition alone, beside each size's min / median /
//   max.
// - gamma per operator and type: the reduction kernels (common/kernels.hpp,
//   through builtin_op) timed per combined byte over a sweep, fitted the same
//   way (the intercept is the call's own cost).
//
// Waits are the links' own (spin briefly, then yield or sleep) with a
// deadline, so a calibration survives a loaded or oversubscribed machine and
// never hangs: its figures only get noisier, which their spread shows.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/link.hpp"
#include "exec/step_executor.hpp"
#include "topology/machine.hpp"

namespace copse {

// ---- fitting -----------------------------------------------------------------------

struct Spread {
  double min = 0, median = 0, max = 0;
};
Spread spread_of(std::vector<double> values);  // zeros for none; median of an even count: the mean of the middle two

// time = alpha + beta * bytes, by least squares on relative errors: minimises
// sum ((t_i - alpha - beta*x_i) / t_i)^2, so an 8-byte message's 1 us weighs as
// much as a 4 MiB one's 400 us. A negative coefficient is clamped to 0 and the
// other refitted alone (the model's times are non-negative).
struct LinearFit {
  double alpha = 0;
  double beta = 0;
  double residual = 0;  // root mean square of (t_i - fitted) / t_i
  bool clamped = false;
};
// UsageError for fewer than two points, sizes that are all equal, or a time
// that is not positive and finite.
LinearFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds);

// One swept measurement: per size, one time per repetition.
struct Sweep {
  std::vector<std::uint64_t> bytes;
  std::vector<std::vector<double>> seconds;  // [size][repetition]
  LinearFit fit;                             // of each size's fastest repetition
  Spread alpha, beta;                        // of the fits of each repetition alone
};
void analyse(Sweep& sweep);  // fills fit, alpha and beta from bytes and seconds

// ---- what is measured --------------------------------------------------------------

struct CalibrateOptions {
  int repetitions = 7;
  std::uint64_t max_bytes = std::uint64_t{4} << 20;
  bool quick = false;  // fewer sizes and iterations: seconds, for tests
  std::chrono::milliseconds wait_timeout{10000};
};
void check_options(const CalibrateOptions& options);  // UsageError naming the option
// 8 B, then powers of two (quick: of four) up to max_bytes, and max_bytes itself.
std::vector<std::uint64_t> sweep_sizes(const CalibrateOptions& options);

// A pair of cores standing for one level of the node.
struct CorePair {
  std::string level;        // "l2", "l3", "package", "machine"
  std::string description;  // "cores sharing an L3 (not an L2)"
  int pu_a = 0, pu_b = 0;   // logical PU indices
  int group_cores = 0;      // usable cores in the object the pair shares (0 for "machine")
};
// One pair per level the machine has among the PUs `usable` (OS indices; one
// PU per core, SMT siblings are not a level), finest first; each level
// without a pair gets a line in `skipped` saying so.
std::vector<CorePair> core_pairs(const Machine& machine, std::span<const int> usable,
                                 std::vector<std::string>& skipped);

struct LevelResult {
  std::string level;  // as CorePair, or "network" for the MPI link
  std::string description;
  std::string pair;  // "PU 0 and PU 1 (OS 0 and 1)", "MPI ranks 0 and 1 on host h"
  std::string link;  // "shared-memory link, threads", "MPI link, processes"
  // The model keys it gives: "group" (group_alpha, group_beta, group_size),
  // "intra", "inter", or "" (measured and printed only).
  std::string role;
  int group_size = 0;
  Sweep ping_pong, stream;
};

struct GammaResult {
  std::string op, dtype;
  Sweep sweep;  // alpha: the call's own cost; beta: gamma, seconds per combined byte
};

struct Calibration {
  std::string machine;  // Machine::source(), or the MPI program's description
  CalibrateOptions options;
  std::vector<LevelResult> levels;
  std::vector<std::string> skipped;
  std::vector<GammaResult> gamma;
};

// Both sides of the pair sweeps for rank c.rank (0 or 1) of `executor`'s
// layout, exchanging with the other over whatever link the rank map chooses.
// `buffer` holds max(sizes) bytes, reachable by the link (arena memory for
// the shared-memory link). Returns rank 0's times (rank 1: empty sweeps):
// ping_pong.seconds and stream.seconds per size and repetition, per message.
struct PairSweeps {
  Sweep ping_pong, stream;
};
PairSweeps run_pair(StepExecutor& executor, LinkRank& c, std::byte* buffer, const std::vector<std::uint64_t>& sizes,
                    const CalibrateOptions& options);

// The node's levels: threads pinned to each core pair, over the
// shared-memory link. Roles: with one level it is "intra"; with several the
// finest is "group" and the coarsest "intra".
std::vector<LevelResult> measure_node_levels(const Machine& machine, const CalibrateOptions& options,
                                             std::vector<std::string>& skipped);
// sum, max and prod over int32, int64, float and double.
std::vector<GammaResult> measure_gamma(const CalibrateOptions& options);
// This machine: its levels and gamma.
Calibration calibrate_node(const CalibrateOptions& options);

// ---- what is written ---------------------------------------------------------------

// One [model] key of the model file: its value as the configuration reads it
// ("412.3ns", "4") and what it came from.
struct ModelEntry {
  std::string key;
  std::string value;
  std::string note;
  std::vector<std::string> details;  // comment lines after the key
};
std::vector<ModelEntry> model_entries(const Calibration& calibration);

// Writes the model file: a TOML fragment, [model] and the entries. A file
// that a previous calibration wrote keeps the keys this one did not measure
// (so copse calibrate and then copse_calibrate_mpi build one file); any other
// existing file is refused (UsageError), never overwritten. SystemError if
// the file cannot be written.
void write_model_file(const std::string& path, const Calibration& calibration);
// What write_model_file would refuse, checked before measuring: UsageError
// for an empty name or an existing file that no calibration wrote.
void check_model_file(const std::string& path);

std::string format_report(const Calibration& calibration, const std::string& output);  // for people
std::string report_json(const Calibration& calibration, const std::string& output);    // one JSON object
// One line per level whose ping-pong fit clamped a coefficient at 0 (its times
// did not grow with size, or grew from nothing: a busy machine, most often),
// for stderr; empty when every fit stands as measured.
std::string clamp_warnings(const Calibration& calibration);

}  // namespace copse
