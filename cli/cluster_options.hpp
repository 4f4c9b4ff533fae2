#pragma once
// The emulated cluster's options, shared by `copse emulate` and `copse demo`:
// their defaults from the configuration, their registration, the
// EmulatedCluster they describe, and how a checked emulation is reported.

#include <string>
#include <utility>
#include <vector>

#include "cli/options.hpp"
#include "tools/experiment.hpp"

namespace copse {

// The extended model (common/cost_model.hpp) as sim and emulate take it:
// timing rule, LogGP overheads and gaps, the shared interface. Defaults from
// the configuration (the cluster preset unless it says otherwise).
struct ExtendedModelArgs {
  std::string timing, intra_overhead, inter_overhead, intra_gap, inter_gap, nic_beta;
  int nic_rails = 1;
};
ExtendedModelArgs configured_extended_model(const ModelOptions& model);
void add_extended_model_options(CLI::App* command, ExtendedModelArgs& args);
// Sets those fields of `model`; UsageError for bad values.
void apply_extended_model(const ExtendedModelArgs& args, ModelOptions& model);

struct ClusterArgs {
  int nodes = 8;
  int ranks_per_node = 4;
  std::string bytes = "1MiB";
  std::string dtype = "int32";
  std::string op = "sum";
  std::string intra_alpha, intra_beta, inter_alpha, inter_beta, gamma, ports, receive_overhead;
  ExtendedModelArgs extended;
  std::string group_alpha, group_beta;  // the group level
  int group_size = 0;
  int repetitions = 3;
  std::string timeout;
  // The hierarchy (any of these turns it on): intranode groups feeding the
  // inter-node algorithm among the off-node ranks.
  std::string node_topology;  // hwloc synthetic text for every node; empty: this machine
  std::string grouping;       // auto | numa | package | l3 | l2 | core | size:K
  int max_group = 4;
  bool multi_leader = false;        // deprecated: --form multi-leader
  std::string form;                 // flat | leader | multi-leader | lanes | auto; empty: from the options above
  std::string ranks_per_node_list;  // uneven nodes, e.g. 5,8,1 (replaces --nodes and --ranks-per-node)
  std::string arrival = "none";     // per-rank start offsets (tools/experiment.hpp, ArrivalPattern)
  std::string arrival_error = "0";  // how wrong the predictions schedules are planned from are
};

// --algorithm NAME or --schedule-file FILE (a schedule file,
// algorithms/schedule_file.hpp), as sim, emulate and verify take them.
struct AlgorithmArgs {
  std::string algorithm;
  std::string schedule_file;
  bool collective_given = false;  // --collective was on the command line
  bool ranks_given = false;       // --ranks was (sim, verify)
};
void add_algorithm_options(CLI::App* command, AlgorithmArgs& args);
// Call from the subcommand's callback (it records whether --collective and
// --ranks were given).
void note_algorithm_options(CLI::App* command, AlgorithmArgs& args);
// The algorithm they name for the collective `collective` (--collective's
// text); with --schedule-file and no --collective, the file's first
// collective. Loading a file proves it (UsageError "FILE:LINE: ...").
const AlgorithmInfo& chosen_algorithm(const AlgorithmArgs& args, const std::string& collective);
// Whether they ask for the selection's choice: --algorithm auto (plan/selection.hpp).
bool selects_algorithm(const AlgorithmArgs& args);
// `ranks` if --ranks was given, else the rank count --schedule-file is
// written for; UsageError when there is neither.
int chosen_ranks(const AlgorithmArgs& args, int ranks);

// --arrival and --arrival-error, as sim, emulate and demo take them.
void add_arrival_options(CLI::App* command, std::string& arrival, std::string& arrival_error);
// The pattern for `ranks` ranks and the predictions planned from (empty: the
// pattern itself). UsageError for malformed text.
std::pair<ArrivalPattern, std::vector<Picos>> arrival_setup(const std::string& arrival,
                                                            const std::string& arrival_error, int ranks);
// The JSON keys every timed subcommand reports about arrival: `arrival`
// {pattern, error, max_offset_ps}, `after_last_arrival_ps`, `mean_elapsed_ps`.
void add_arrival_json(Json& json, const ArrivalPattern& pattern, const std::string& arrival_error,
                      const std::vector<Picos>& finish);
// "one-late:1ms: after the last arrival 12.3 us, mean elapsed 1.01 ms"
std::string arrival_summary(const ArrivalPattern& pattern, const std::vector<Picos>& finish);

// Defaults from the configuration in force. The hierarchy keys apply only
// where a file or variable sets them: by default an emulated cluster runs its
// algorithm flat over all ranks. The wait deadline is the emulator's own
// (EmulatorConfig) unless runtime.wait_timeout is set.
ClusterArgs configured_cluster_args(const Config& config);

// `full_model`: also the cost-model and hierarchy options (emulate has them,
// demo does not).
void add_cluster_options(CLI::App* command, ClusterArgs& args, bool full_model);

// Everything about one emulated run that does not depend on the algorithm.
struct EmulationSetup {
  EmulatedCluster cluster;
  ReduceOp op;
  std::uint64_t bytes = 0;
  std::uint64_t count = 0;
  std::string arrival_error = "0";  // as given (the pattern itself is in the cluster's spec)
};
EmulationSetup make_setup(const ClusterArgs& args);  // UsageError for bad values

// The `copse emulate --json` object of one checked emulation.
Json emulation_json(const EmulationSetup& setup, const AlgorithmInfo& algorithm, const CheckedEmulation& run,
                    std::optional<int> requested_blocks);
// "same node 200 ns + 50 ps/B, other node ..., combine 25 ps/B, bidirectional ports"
std::string model_summary(const CostModel& model);

}  // namespace copse
