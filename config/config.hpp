#pragma once
// Configuration in one place: typed options for the C++ API, filled from
// built-in defaults, a TOML config file, COPSE_* environment variables and
// explicit settings, each value remembering where it came from.
//
// Precedence, lowest first:
//   built-in default < config file < environment < explicit setting
// (an explicit setting is Config::set from the C++ API, or a command-line flag).
//
// The config file: LoadArgs::config_file (the CLI's --config FILE) if given,
// else $COPSE_CONFIG if set, else ./copse.toml if it exists, else none. An
// empty path (--config "" or COPSE_CONFIG=) means no file at all. A file named
// explicitly must exist; ./copse.toml is only read when present.
//
// Keys are section.key; a key's environment variable is COPSE_<SECTION>_<KEY>
// in upper case (model.inter_alpha: COPSE_MODEL_INTER_ALPHA):
//
//   model.intra_alpha        TIME    200ns    per-message latency, same node
//   model.intra_beta         TIME    50ps     per-byte time, same node
//   model.inter_alpha        TIME    1.5us    per-message latency, other node
//   model.inter_beta         TIME    100ps    per-byte time, other node
//   model.gamma              TIME    25ps     per combined (or copied) byte
//   model.ports              bi|uni  bi       bidirectional or unidirectional ports
//   model.receive_overhead   TIME    0s       receiver's cost per received message
//   model.timing             hockney|loggp  hockney  rendezvous alpha+beta*n, or LogGP (o, g, L overlaps)
//   model.intra_overhead     TIME    0s       LogGP o per message at each end, same node
//   model.inter_overhead     TIME    0s       LogGP o per message at each end, other node
//   model.intra_gap          TIME    0s       LogGP g, least time between messages of a port, same node
//   model.inter_gap          TIME    0s       LogGP g, other node
//   model.nic_beta           TIME    0s       per-byte time of one lane of a node's shared interface; 0s = none
//   model.nic_rails          int>=1  1        lanes of the shared interface
//   model.group_size         int>=0  0        K>0: a third level, K consecutive ranks sharing a cache
//   model.group_alpha        TIME    100ns    per-message latency within a group
//   model.group_beta         TIME    25ps     per-byte time within a group
//   hierarchy.grouping       auto|numa|package|l3|l2|core|size:K   auto
//   hierarchy.max_group      int>=1  4        auto grouping: most ranks per group
//   hierarchy.form           flat|leader|multi-leader|lanes|auto  leader  (one node: the flat selection)
//   hierarchy.multi_leader   bool    false    deprecated: form multi-leader
//   hierarchy.node_topology  string  ""       hwloc synthetic description; "" = detect
//   hierarchy.ranks_per_node int>=0  0        MPI: virtual nodes of K consecutive ranks; 0 = real nodes
//   collectives.allreduce    name    dual-root
//   collectives.reduce       name    binary-tree
//   collectives.bcast        name    binary-tree
//   collectives.barrier      name    dual-root
//   collectives.allgather    name    binary-tree
//   collectives.reduce_scatter  name binary-tree  (MPI_Reduce_scatter and _block)
//   collectives.scatter      name    binomial  (flat schedules; the default is read as the selection)
//   collectives.gather       name    binomial
//   collectives.alltoall     name    pairwise
//   collectives.blocks       auto|int>=1  auto
//   runtime.wait_timeout     TIME|none  none  a blocking wait past this fails (> 0);
//                                             none: wait as long as it takes
//   runtime.wait_report      TIME    60s      a blocked Comm says whom it waits for this often (0s: never)
//   runtime.spin             int>=0  2000     spin iterations before blocking
//   mpi.serve                all|none|C,C,...  all   MPI collectives the interposition library serves
//   mpi.min_bytes            SIZE    0        smaller calls go to the MPI library
//   mpi.max_bytes            SIZE|none  none  larger calls go to the MPI library
//   mpi.stats                FILE    ""       append one JSON line per process at MPI_Finalize; "" = none
//   mpi.trace                FILE    ""       one JSON line per collective call per process (mpi/trace.hpp); "" = none
//   mpi.table                FILE|none  ""    decision table: which calls copse serves (config/decision_table.hpp);
//                                             "" = the built-in table, none = serve every call the above allow
//   mpi.cma                  auto|on|allgather|off  auto  processes of a node read large messages from each
//                                             other's memory
//   mpi.keep_heap            bool    true     at MPI_Init, malloc keeps freed heap memory mapped (glibc
//                                             thresholds at their dynamic ceiling)
//
// TIME is common/units.hpp's syntax ("1.5us", "50ps", "60s", "1e-6"); in the
// file it may also be a TOML number, in seconds. SIZE is its byte syntax
// ("64KiB", "1e6"); in the file it may also be a TOML integer of bytes. Booleans in the environment
// (and in Config::set) are true/false, 1/0, yes/no or on/off; in the file,
// TOML booleans. Integers in the file are TOML integers; collectives.blocks
// may be the string "auto" or an integer.
//
// Every mistake is one UsageError (the CLI's exit 2) naming the key, the value
// and its source, e.g.
//   model.inter_alpha = "fast" (from env COPSE_MODEL_INTER_ALPHA): not a time
//   (expected a number, optionally followed by a unit (s, ms, us, ns, ps)); use e.g. 1.5us
// Unknown keys in the file and unknown COPSE_* variables (COPSE_CONFIG
// excepted) are errors too, so that a typo never passes silently.

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/cost_model.hpp"
#include "runtime/comm.hpp"
#include "topology/plan.hpp"

namespace copse {

// The cost model's parameters, in seconds (per byte for the betas and gamma).
// The defaults are CostModel::cluster()'s (common/cost_model.hpp,
// model_defaults): CostModel()'s links with LogGP timing, per-message
// overheads and a shared interface per node. Hockney, the special case, is
// timing = hockney with no overheads and nic_beta = 0
// (examples/hockney.toml).
struct ModelOptions {
  double intra_alpha = model_defaults::same_node.alpha;   // same node, per message
  double intra_beta = model_defaults::same_node.beta;     // same node, per byte
  double inter_alpha = model_defaults::other_node.alpha;  // other node, per message
  double inter_beta = model_defaults::other_node.beta;    // other node, per byte
  double gamma = model_defaults::gamma;                   // per combined or copied byte
  Ports ports = model_defaults::ports;
  double receive_overhead = model_defaults::receive_overhead;  // per received message
  Timing timing = model_defaults::cluster_timing;
  double intra_overhead = model_defaults::cluster_same_node_overhead;  // LogGP o
  double inter_overhead = model_defaults::cluster_other_node_overhead;
  double intra_gap = 0, inter_gap = 0;                 // LogGP g
  double nic_beta = model_defaults::cluster_nic.beta;  // per byte per lane; 0: no shared interface
  int nic_rails = model_defaults::cluster_nic.rails;
  int group_size = 0;  // > 0: a group level below the node
  double group_alpha = 1e-7, group_beta = 2.5e-11;
  bool operator==(const ModelOptions&) const = default;
};

struct HierarchyOptions {
  std::string grouping = Grouping().to_string();  // Grouping::parse's syntax (validated text)
  int max_group = Grouping().max_group;           // >= 1
  Form form = Form::leader;                       // plan/planner.hpp
  bool multi_leader = false;                      // deprecated: with form leader, means multi-leader
  std::string node_topology;                      // hwloc synthetic description; empty: detect this machine
  // Under MPI: 0, nodes are the communicator's shared-memory islands; K > 0,
  // virtual nodes of K consecutive ranks (the last may hold fewer), so that
  // one host exercises the inter-node path.
  int ranks_per_node = 0;
  Grouping parsed_grouping() const { return Grouping::parse(grouping, max_group); }
  bool operator==(const HierarchyOptions&) const = default;
};

// The defaults are the team's (runtime/comm.hpp, team_defaults).
struct CollectiveOptions {
  std::string allreduce{team_defaults::allreduce};  // registered algorithm names
  std::string reduce{team_defaults::reduce};
  std::string bcast{team_defaults::bcast};
  std::string barrier{team_defaults::barrier};
  std::string allgather{team_defaults::allgather};
  std::string reduce_scatter{team_defaults::reduce_scatter};
  std::string scatter{team_defaults::scatter};
  std::string gather{team_defaults::gather};
  std::string alltoall{team_defaults::alltoall};
  std::optional<int> blocks;  // nullopt: auto (the count that minimises simulated time)
  // The registered algorithm chosen for `collective`.
  const AlgorithmInfo& algorithm(Collective collective) const;
  bool operator==(const CollectiveOptions&) const = default;
};

struct RuntimeOptions {
  // Seconds, > 0; nullopt (the default, "none"): a wait lasts as long as the
  // peer takes. The CLI's emulations use EmulatorConfig's own deadline
  // unless this is set.
  std::optional<double> wait_timeout;
  double wait_report = static_cast<double>(team_defaults::wait_report.count());  // seconds; 0: never
  int spin = 2000;  // spin iterations before a wait blocks, >= 0
  // wait_timeout rounded up to whole milliseconds (nullopt stays nullopt).
  std::optional<std::chrono::milliseconds> wait_timeout_ms() const;
  std::chrono::milliseconds wait_report_ms() const;
  bool operator==(const RuntimeOptions&) const = default;
};

// The ten MPI collectives the interposition library (mpi/) can serve, in
// the order mpi.serve's text and the stats file list them.
enum class MpiCollective : std::uint8_t {
  allreduce,
  reduce,
  bcast,
  barrier,
  allgather,
  reduce_scatter_block,
  reduce_scatter,
  scatter,
  gather,
  alltoall,
  // The v-variants (issue 19; mpi/interposer_vector.cpp).
  allgatherv,
  gatherv,
  scatterv,
  alltoallv,
};
inline constexpr std::array<MpiCollective, 14> kMpiCollectives = {
    MpiCollective::allreduce,      MpiCollective::reduce,     MpiCollective::bcast,
    MpiCollective::barrier,        MpiCollective::allgather,  MpiCollective::reduce_scatter_block,
    MpiCollective::reduce_scatter, MpiCollective::scatter,    MpiCollective::gather,
    MpiCollective::alltoall,       MpiCollective::allgatherv, MpiCollective::gatherv,
    MpiCollective::scatterv,       MpiCollective::alltoallv};
std::string_view to_string(MpiCollective c);  // "allreduce", ..., "alltoall", "allgatherv", ..., "alltoallv"

// What the interposition library serves and what it leaves to the MPI library.
enum class CmaMode { automatic, on, allgather, off };  // mpi.cma

struct MpiOptions {
  // Bit c set: MpiCollective c is served (when its datatype, operator and
  // communicator allow); clear: every such call goes to the MPI library.
  std::uint32_t serve = (1U << kMpiCollectives.size()) - 1;
  // Bounds on the bytes each process contributes (count x datatype size: for
  // allgather, scatter, gather and alltoall one block, for reduce_scatter its
  // whole input); a call outside them goes to the MPI library. Barriers have
  // no bytes and ignore them.
  std::uint64_t min_bytes = 0;
  std::optional<std::uint64_t> max_bytes;  // nullopt: no upper bound
  std::string stats;                       // file that gets one JSON line per process at MPI_Finalize; empty: none
  std::string trace;                       // one JSON line per collective call (mpi/trace.hpp); empty: none
  // The decision table (config/decision_table.hpp): a file; empty, the
  // built-in table; "none", no table.
  std::string table;
  // Cross-memory attach between the processes of a node (CommOptions::
  // cross_memory_attach): auto where a probe at set-up finds it allowed,
  // for every collective where it is no slower than the copies it replaces,
  // else for allgathers alone; on, for every collective where allowed;
  // allgather, for allgathers alone where allowed; off: never.
  CmaMode cma = CmaMode::automatic;
  // At MPI_Init, glibc malloc's mmap and trim thresholds fixed at the
  // ceiling its dynamic ones reach (mpi/interposer.cpp's keep_heap).
  bool keep_heap = true;
  bool serves(MpiCollective c) const { return (serve >> static_cast<unsigned>(c) & 1U) != 0; }
  bool operator==(const MpiOptions&) const = default;
};

// Everything configurable, typed. A default-constructed Options holds the
// built-in defaults; code that needs no provenance can fill one directly.
struct Options {
  ModelOptions model;
  HierarchyOptions hierarchy;
  CollectiveOptions collectives;
  RuntimeOptions runtime;
  MpiOptions mpi;
  bool operator==(const Options&) const = default;
};

// The cost model the model section describes: two levels (0: same node, 1:
// other node), or three with a group size (0: same group), its timing rule,
// overheads, gaps and shared interface.
CostModel make_cost_model(const ModelOptions& model);

// The Team that `options` describe, on nodes holding ranks_per_node[i] ranks
// each, every node's machine being hierarchy.node_topology (empty: this
// machine, found by hwloc). Throws UsageError for an empty list, a node
// without ranks, or an invalid topology.
TeamOptions make_team_options(const Options& options, std::span<const int> ranks_per_node);
// What `options` say about planning (collectives, model, hierarchy form and
// grouping): the part the thread Team and the MPI Team share.
PlanOptions make_plan_options(const Options& options);

// One configurable key, for listings and help.
struct ConfigKey {
  std::string_view name;         // "model.inter_alpha"
  std::string_view env;          // "COPSE_MODEL_INTER_ALPHA"
  std::string_view type;         // "TIME", "SIZE", "bi|uni", "int >= 1", ...
  std::string_view description;  // one line
};
std::span<const ConfigKey> config_keys();  // in documentation order

// The environment variable that names the config file.
inline constexpr std::string_view kConfigFileEnv = "COPSE_CONFIG";

// Where a value came from.
struct ConfigSource {
  enum class Kind : std::uint8_t { default_value, file, env, explicit_setting };
  Kind kind = Kind::default_value;
  std::string origin;  // file: its path as given; env: the variable's name; otherwise empty
  // "default", "file PATH", "env COPSE_X" or "cli" (an explicit setting).
  std::string to_string() const;
  std::string_view kind_name() const;  // "default", "file", "env", "cli"
  bool operator==(const ConfigSource&) const = default;
};

// A key's effective value: bool, integer (SIZE in bytes), TIME in seconds
// (double), or text (names, "bi"/"uni", grouping, "auto" for
// collectives.blocks, "none" for runtime.wait_timeout and mpi.max_bytes).
using ConfigValue = std::variant<bool, std::int64_t, double, std::string>;

struct LoadArgs {
  // Set: this config file (the CLI's --config); empty: no file.
  // Unset: $COPSE_CONFIG if set, else ./copse.toml if it exists, else none.
  std::optional<std::string> config_file;
  // Unset: the process's environment. Set: these NAME=VALUE pairs instead
  // (for tests and embedders that must not read the real environment).
  std::optional<std::vector<std::pair<std::string, std::string>>> environment;
};

class Config {
 public:
  // Defaults only; every source "default", no file.
  Config();

  // Defaults, then the config file, then COPSE_* variables. Throws UsageError
  // for an unreadable or malformed file, an unknown key or variable, or an
  // invalid value (naming the key, the value and the source).
  static Config load(const LoadArgs& args = {});

  const Options& options() const { return options_; }

  // An explicit setting (highest precedence), from text as the environment
  // would give it: set("model.inter_alpha", "5us"). Throws UsageError for an
  // unknown key or an invalid value; on error nothing changes.
  void set(std::string_view key, std::string_view value);

  // Throw UsageError for an unknown key.
  const ConfigSource& source_of(std::string_view key) const;
  ConfigValue value(std::string_view key) const;
  // The value as text that set() and the environment accept back unchanged:
  // TIME exactly ("1.5us", "50ps"), "auto", "true", "dual-root", ...
  std::string value_text(std::string_view key) const;

  // The config file that was read, if any, and how it was chosen:
  // "--config", "env COPSE_CONFIG" or "working directory" (./copse.toml).
  const std::optional<std::string>& file() const { return file_; }
  const std::string& file_origin() const { return file_origin_; }

  CostModel cost_model() const { return make_cost_model(options_.model); }

 private:
  Options options_;
  std::vector<ConfigSource> sources_;  // one per config_keys() entry
  std::optional<std::string> file_;
  std::string file_origin_;

  friend struct ConfigLoader;
};

// A TIME as text that parse_time reads back to exactly `seconds`, in the
// largest unit that keeps the number at least 1: "1.5us", "50ps", "60s", "0s".
std::string exact_time_text(double seconds);

}  // namespace copse
