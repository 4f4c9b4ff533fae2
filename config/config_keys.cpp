// The configuration keys: one table row per key (name, variable, type,
// description, reader, getter), and the typed readers that check a raw value
// from any source against its key.
#include "config/config_keys.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <system_error>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "plan/planner.hpp"

namespace copse::config_detail {

// ---------------------------------------------------------------- raw values

std::string quote_text(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + '"';
}

Raw text_value(std::string_view text, std::string where) {
  Raw r;
  r.kind = Raw::Kind::text;
  r.str = std::string(text);
  r.shown = quote_text(text);
  r.where = std::move(where);
  return r;
}

namespace {

bool is_text(const Raw& r) { return r.kind == Raw::Kind::text || r.kind == Raw::Kind::string; }

std::string kind_name(const Raw& r) {
  switch (r.kind) {
    case Raw::Kind::text: return "text";
    case Raw::Kind::string: return "a string";
    case Raw::Kind::integer: return "an integer";
    case Raw::Kind::floating: return "a floating-point number";
    case Raw::Kind::boolean: return "a boolean";
    case Raw::Kind::array: return "an array";
    case Raw::Kind::table: return "a table";
    case Raw::Kind::date_time: return "a date or time";
  }
  return "?";
}

// ---------------------------------------------------------------- typed readers

// parse_time and parse_size say: invalid WHAT "TEXT": WHY. The why alone, for
// a message that names the key, the value and its source itself.
std::string reason_of(const UsageError& e, std::string_view what, std::string_view text) {
  std::string why = e.what();
  const std::string prefix = "invalid " + std::string(what) + " " + quote_text(text) + ": ";
  if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
  return why;
}

// TIME: text through parse_time; a TOML number is seconds, written out in
// shortest round-trip form and read back through the same parser.
double read_time(const Raw& r, std::string_view example) {
  std::string text;
  if (is_text(r)) {
    text = r.str;
  } else if (r.kind == Raw::Kind::integer) {
    text = std::to_string(r.integer);
  } else if (r.kind == Raw::Kind::floating) {
    char buffer[64];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, r.floating);
    text = ec == std::errc{} ? std::string(buffer, end) : std::string("nan");
  } else {
    throw BadValue{"not a time (got " + kind_name(r) + "); use e.g. " + std::string(example)};
  }
  try {
    return parse_time(text);
  } catch (const UsageError& e) {
    throw BadValue{"not a time (" + reason_of(e, "time", text) + "); use e.g. " + std::string(example)};
  }
}

int read_int(const Raw& r, int minimum) {
  const std::string expected = "expected a whole number >= " + std::to_string(minimum);
  std::int64_t value = 0;
  if (r.kind == Raw::Kind::text) {
    const char* end = r.str.data() + r.str.size();
    const auto [ptr, ec] = std::from_chars(r.str.data(), end, value);
    if (r.str.empty() || ptr != end || (ec != std::errc{} && ec != std::errc::result_out_of_range))
      throw BadValue{expected};
    if (ec == std::errc::result_out_of_range) throw BadValue{"out of range; " + expected};
  } else if (r.kind == Raw::Kind::integer) {
    value = r.integer;
  } else {
    throw BadValue{expected + " (got " + kind_name(r) + ")"};
  }
  if (value < minimum) throw BadValue{expected};
  if (value > std::numeric_limits<int>::max())
    throw BadValue{"out of range (at most " + std::to_string(std::numeric_limits<int>::max()) + ")"};
  return static_cast<int>(value);
}

bool read_bool(const Raw& r) {
  if (r.kind == Raw::Kind::boolean) return r.boolean;
  if (r.kind == Raw::Kind::text) {
    for (std::string_view t : {"true", "1", "yes", "on"})
      if (r.str == t) return true;
    for (std::string_view f : {"false", "0", "no", "off"})
      if (r.str == f) return false;
    throw BadValue{"expected true or false (also 1/0, yes/no, on/off)"};
  }
  throw BadValue{"expected true or false (got " + kind_name(r) + ")"};
}

const std::string& read_string(const Raw& r) {
  if (!is_text(r)) throw BadValue{"expected a string (got " + kind_name(r) + ")"};
  return r.str;
}

Ports read_ports(const Raw& r) {
  if (is_text(r)) {
    if (r.str == "bi" || r.str == "bidirectional") return Ports::bidirectional;
    if (r.str == "uni" || r.str == "unidirectional") return Ports::unidirectional;
  }
  throw BadValue{"expected bi or uni"};
}

Timing read_timing(const Raw& r) {
  if (is_text(r)) {
    if (r.str == "hockney") return Timing::hockney;
    if (r.str == "loggp") return Timing::loggp;
  }
  throw BadValue{"expected hockney or loggp"};
}

CmaMode read_cma(const Raw& r) {
  if (is_text(r)) {
    if (r.str == "auto") return CmaMode::automatic;
    if (r.str == "on") return CmaMode::on;
    if (r.str == "allgather") return CmaMode::allgather;
    if (r.str == "off") return CmaMode::off;
  }
  throw BadValue{"expected auto, on, allgather or off"};
}

// A grouping as Grouping::parse reads it (its message says what is accepted).
std::string read_grouping(const Raw& r) {
  const std::string& text = read_string(r);
  try {
    (void)Grouping::parse(text);
  } catch (const UsageError& e) {
    throw BadValue{e.what()};
  }
  return text;
}

Form read_form(const Raw& r) {
  try {
    return parse_form(read_string(r));
  } catch (const UsageError& e) {
    throw BadValue{e.what()};
  }
}

std::string read_algorithm(const Raw& r, Collective collective) {
  const std::string& name = read_string(r);
  if (name == kSelectAlgorithm) return name;  // the selection's choice (plan/planner.hpp)
  try {
    return std::string(find_algorithm(collective, name).name);
  } catch (const UsageError& e) {
    throw BadValue{e.what()};
  }
}

std::optional<int> read_blocks(const Raw& r) {
  if (is_text(r) && r.str == "auto") return std::nullopt;
  if (r.kind == Raw::Kind::text || r.kind == Raw::Kind::integer) {
    try {
      return read_int(r, 1);
    } catch (const BadValue&) {
    }
  }
  throw BadValue{"expected auto or a whole number >= 1"};
}

// SIZE: text through parse_size; a TOML integer is bytes. At most 2^63 - 1,
// so that every value is also a ConfigValue integer.
std::uint64_t read_size(const Raw& r, std::string_view example) {
  std::uint64_t bytes = 0;
  if (is_text(r)) {
    try {
      bytes = parse_size(r.str);
    } catch (const UsageError& e) {
      throw BadValue{"not a size (" + reason_of(e, "size", r.str) + "); use e.g. " + std::string(example)};
    }
  } else if (r.kind == Raw::Kind::integer && r.integer >= 0) {
    bytes = static_cast<std::uint64_t>(r.integer);
  } else {
    throw BadValue{"expected a size in bytes (got " + kind_name(r) + "); use e.g. " + std::string(example)};
  }
  if (bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw BadValue{"too large (at most 2^63 - 1 bytes)"};
  return bytes;
}

// mpi.serve: "all", "none", or collective names separated by commas.
std::uint32_t read_serve(const Raw& r) {
  const std::string& text = read_string(r);
  const std::uint32_t all = MpiOptions{}.serve;
  if (text == "all") return all;
  if (text == "none") return 0;
  const std::string accepted = "all, none, or a comma-separated list of " + join(kMpiCollectives, ", ");
  std::uint32_t serve = 0;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view name = std::string_view(text).substr(begin, end - begin);
    const auto* found = std::find_if(kMpiCollectives.begin(), kMpiCollectives.end(),
                                     [&](MpiCollective c) { return to_string(c) == name; });
    if (found == kMpiCollectives.end())
      throw BadValue{
          (name.empty() ? std::string("an empty name") : "unknown collective \"" + std::string(name) + "\"") +
          " (accepted: " + accepted + ")"};
    serve |= 1U << static_cast<unsigned>(*found);
    if (end == text.size()) return serve;
    begin = end + 1;
  }
}

// mpi.serve's text: "all", "none", or the served names in kMpiCollectives order.
std::string serve_text(std::uint32_t serve) {
  if (serve == MpiOptions{}.serve) return "all";
  std::vector<std::string_view> names;
  for (MpiCollective c : kMpiCollectives)
    if (serve >> static_cast<unsigned>(c) & 1U) names.push_back(to_string(c));
  return names.empty() ? "none" : join(names, ",");
}

// ---------------------------------------------------------------- the keys

ConfigValue int_value(int v) { return static_cast<std::int64_t>(v); }

// One entry per key: its name, variable, type, description, how a raw value
// becomes typed, and how the typed value is read back. Documentation order.
constexpr std::array kKeys = {
    KeyDef{{"model.intra_alpha", "COPSE_MODEL_INTRA_ALPHA", "TIME", "per-message latency between ranks on one node"},
           [](Options& o, const Raw& r) { o.model.intra_alpha = read_time(r, "200ns"); },
           [](const Options& o) -> ConfigValue { return o.model.intra_alpha; }},
    KeyDef{{"model.intra_beta", "COPSE_MODEL_INTRA_BETA", "TIME", "per-byte time between ranks on one node"},
           [](Options& o, const Raw& r) { o.model.intra_beta = read_time(r, "50ps"); },
           [](const Options& o) -> ConfigValue { return o.model.intra_beta; }},
    KeyDef{{"model.inter_alpha", "COPSE_MODEL_INTER_ALPHA", "TIME", "per-message latency between nodes"},
           [](Options& o, const Raw& r) { o.model.inter_alpha = read_time(r, "1.5us"); },
           [](const Options& o) -> ConfigValue { return o.model.inter_alpha; }},
    KeyDef{{"model.inter_beta", "COPSE_MODEL_INTER_BETA", "TIME", "per-byte time between nodes"},
           [](Options& o, const Raw& r) { o.model.inter_beta = read_time(r, "100ps"); },
           [](const Options& o) -> ConfigValue { return o.model.inter_beta; }},
    KeyDef{{"model.gamma", "COPSE_MODEL_GAMMA", "TIME", "time per combined (or copied) byte"},
           [](Options& o, const Raw& r) { o.model.gamma = read_time(r, "25ps"); },
           [](const Options& o) -> ConfigValue { return o.model.gamma; }},
    KeyDef{{"model.ports", "COPSE_MODEL_PORTS", "bi|uni",
            "bi: a rank sends and receives concurrently; uni: one message at a time"},
           [](Options& o, const Raw& r) { o.model.ports = read_ports(r); },
           [](const Options& o) -> ConfigValue {
             return std::string(o.model.ports == Ports::bidirectional ? "bi" : "uni");
           }},
    KeyDef{{"model.receive_overhead", "COPSE_MODEL_RECEIVE_OVERHEAD", "TIME",
            "time the receiver spends per received message"},
           [](Options& o, const Raw& r) { o.model.receive_overhead = read_time(r, "1us"); },
           [](const Options& o) -> ConfigValue { return o.model.receive_overhead; }},
    KeyDef{{"model.timing", "COPSE_MODEL_TIMING", "hockney|loggp",
            "hockney: rendezvous, alpha + beta*n; loggp: eager, overhead o and gap g per message, latencies overlap"},
           [](Options& o, const Raw& r) { o.model.timing = read_timing(r); },
           [](const Options& o) -> ConfigValue {
             return std::string(o.model.timing == Timing::hockney ? "hockney" : "loggp");
           }},
    KeyDef{{"model.intra_overhead", "COPSE_MODEL_INTRA_OVERHEAD", "TIME",
            "LogGP: CPU time per message at each end, same node"},
           [](Options& o, const Raw& r) { o.model.intra_overhead = read_time(r, "100ns"); },
           [](const Options& o) -> ConfigValue { return o.model.intra_overhead; }},
    KeyDef{{"model.inter_overhead", "COPSE_MODEL_INTER_OVERHEAD", "TIME",
            "LogGP: CPU time per message at each end, other node"},
           [](Options& o, const Raw& r) { o.model.inter_overhead = read_time(r, "1us"); },
           [](const Options& o) -> ConfigValue { return o.model.inter_overhead; }},
    KeyDef{
        {"model.intra_gap", "COPSE_MODEL_INTRA_GAP", "TIME", "LogGP: least time between messages of a port, same node"},
        [](Options& o, const Raw& r) { o.model.intra_gap = read_time(r, "100ns"); },
        [](const Options& o) -> ConfigValue { return o.model.intra_gap; }},
    KeyDef{{"model.inter_gap", "COPSE_MODEL_INTER_GAP", "TIME",
            "LogGP: least time between messages of a port, other node"},
           [](Options& o, const Raw& r) { o.model.inter_gap = read_time(r, "1us"); },
           [](const Options& o) -> ConfigValue { return o.model.inter_gap; }},
    KeyDef{{"model.nic_beta", "COPSE_MODEL_NIC_BETA", "TIME",
            "per-byte time of one lane of a node's shared network interface; 0s: a private port per rank"},
           [](Options& o, const Raw& r) { o.model.nic_beta = read_time(r, "40ps"); },
           [](const Options& o) -> ConfigValue { return o.model.nic_beta; }},
    KeyDef{{"model.nic_rails", "COPSE_MODEL_NIC_RAILS", "int >= 1", "lanes (rails) of a node's shared interface"},
           [](Options& o, const Raw& r) { o.model.nic_rails = read_int(r, 1); },
           [](const Options& o) { return int_value(o.model.nic_rails); }},
    KeyDef{{"model.group_size", "COPSE_MODEL_GROUP_SIZE", "int >= 0",
            "K > 0: K consecutive ranks of a node form a group with its own link level; 0: none"},
           [](Options& o, const Raw& r) { o.model.group_size = read_int(r, 0); },
           [](const Options& o) { return int_value(o.model.group_size); }},
    KeyDef{{"model.group_alpha", "COPSE_MODEL_GROUP_ALPHA", "TIME", "per-message latency within a group"},
           [](Options& o, const Raw& r) { o.model.group_alpha = read_time(r, "100ns"); },
           [](const Options& o) -> ConfigValue { return o.model.group_alpha; }},
    KeyDef{{"model.group_beta", "COPSE_MODEL_GROUP_BETA", "TIME", "per-byte time within a group"},
           [](Options& o, const Raw& r) { o.model.group_beta = read_time(r, "25ps"); },
           [](const Options& o) -> ConfigValue { return o.model.group_beta; }},
    KeyDef{{"hierarchy.grouping", "COPSE_HIERARCHY_GROUPING", "auto|numa|package|l3|l2|core|size:K",
            "how ranks on a node form reduction groups"},
           [](Options& o, const Raw& r) { o.hierarchy.grouping = read_grouping(r); },
           [](const Options& o) -> ConfigValue { return o.hierarchy.grouping; }},
    KeyDef{{"hierarchy.max_group", "COPSE_HIERARCHY_MAX_GROUP", "int >= 1",
            "auto grouping: the most ranks a group may hold"},
           [](Options& o, const Raw& r) { o.hierarchy.max_group = read_int(r, 1); },
           [](const Options& o) { return int_value(o.hierarchy.max_group); }},
    KeyDef{{"hierarchy.form", "COPSE_HIERARCHY_FORM", "flat|leader|multi-leader|lanes|auto",
            "how collectives run across nodes: flat over all ranks, one node leader above groups, every group "
            "leader off-node, lanes (nodes of equal size), or auto (the fastest by simulation)"},
           [](Options& o, const Raw& r) { o.hierarchy.form = read_form(r); },
           [](const Options& o) -> ConfigValue { return std::string(to_string(o.hierarchy.form)); }},
    KeyDef{{"hierarchy.multi_leader", "COPSE_HIERARCHY_MULTI_LEADER", "bool",
            "deprecated (hierarchy.form = multi-leader): with form leader, every group leader talks off-node"},
           [](Options& o, const Raw& r) { o.hierarchy.multi_leader = read_bool(r); },
           [](const Options& o) -> ConfigValue { return o.hierarchy.multi_leader; }},
    KeyDef{{"hierarchy.node_topology", "COPSE_HIERARCHY_NODE_TOPOLOGY", "string",
            "hwloc synthetic description of each emulated node; empty: detect this machine"},
           [](Options& o, const Raw& r) { o.hierarchy.node_topology = read_string(r); },
           [](const Options& o) -> ConfigValue { return o.hierarchy.node_topology; }},
    KeyDef{{"hierarchy.ranks_per_node", "COPSE_HIERARCHY_RANKS_PER_NODE", "int >= 0",
            "MPI: virtual nodes of K consecutive ranks, to exercise the inter-node path on one host; 0: real nodes"},
           [](Options& o, const Raw& r) { o.hierarchy.ranks_per_node = read_int(r, 0); },
           [](const Options& o) { return int_value(o.hierarchy.ranks_per_node); }},
    KeyDef{{"collectives.allreduce", "COPSE_COLLECTIVES_ALLREDUCE", "NAME|auto|file:PATH",
            "allreduce algorithm among node leaders; file:PATH: a schedule file"},
           [](Options& o, const Raw& r) { o.collectives.allreduce = read_algorithm(r, Collective::allreduce); },
           [](const Options& o) -> ConfigValue { return o.collectives.allreduce; }},
    KeyDef{{"collectives.reduce", "COPSE_COLLECTIVES_REDUCE", "NAME|auto|file:PATH",
            "reduce algorithm among node leaders"},
           [](Options& o, const Raw& r) { o.collectives.reduce = read_algorithm(r, Collective::reduce); },
           [](const Options& o) -> ConfigValue { return o.collectives.reduce; }},
    KeyDef{
        {"collectives.bcast", "COPSE_COLLECTIVES_BCAST", "NAME|auto|file:PATH", "bcast algorithm among node leaders"},
        [](Options& o, const Raw& r) { o.collectives.bcast = read_algorithm(r, Collective::bcast); },
        [](const Options& o) -> ConfigValue { return o.collectives.bcast; }},
    KeyDef{{"collectives.barrier", "COPSE_COLLECTIVES_BARRIER", "NAME|auto|file:PATH",
            "barrier algorithm among node leaders"},
           [](Options& o, const Raw& r) { o.collectives.barrier = read_algorithm(r, Collective::barrier); },
           [](const Options& o) -> ConfigValue { return o.collectives.barrier; }},
    KeyDef{{"collectives.allgather", "COPSE_COLLECTIVES_ALLGATHER", "NAME|auto|file:PATH",
            "allgather algorithm among node leaders"},
           [](Options& o, const Raw& r) { o.collectives.allgather = read_algorithm(r, Collective::allgather); },
           [](const Options& o) -> ConfigValue { return o.collectives.allgather; }},
    KeyDef{
        {"collectives.reduce_scatter", "COPSE_COLLECTIVES_REDUCE_SCATTER", "NAME|auto|file:PATH",
         "reduce_scatter algorithm among node leaders (also for MPI_Reduce_scatter_block)"},
        [](Options& o, const Raw& r) { o.collectives.reduce_scatter = read_algorithm(r, Collective::reduce_scatter); },
        [](const Options& o) -> ConfigValue { return o.collectives.reduce_scatter; }},
    KeyDef{{"collectives.scatter", "COPSE_COLLECTIVES_SCATTER", "NAME|auto|file:PATH",
            "scatter algorithm (flat schedules; the default: the selection's)"},
           [](Options& o, const Raw& r) { o.collectives.scatter = read_algorithm(r, Collective::scatter); },
           [](const Options& o) -> ConfigValue { return o.collectives.scatter; }},
    KeyDef{{"collectives.gather", "COPSE_COLLECTIVES_GATHER", "NAME|auto|file:PATH",
            "gather algorithm (flat schedules; the default: the selection's)"},
           [](Options& o, const Raw& r) { o.collectives.gather = read_algorithm(r, Collective::gather); },
           [](const Options& o) -> ConfigValue { return o.collectives.gather; }},
    KeyDef{{"collectives.alltoall", "COPSE_COLLECTIVES_ALLTOALL", "NAME|auto|file:PATH",
            "alltoall algorithm (flat schedules; the default: the selection's)"},
           [](Options& o, const Raw& r) { o.collectives.alltoall = read_algorithm(r, Collective::alltoall); },
           [](const Options& o) -> ConfigValue { return o.collectives.alltoall; }},
    KeyDef{{"collectives.blocks", "COPSE_COLLECTIVES_BLOCKS", "auto|int >= 1",
            "pipeline blocks; auto: the count that minimises simulated time"},
           [](Options& o, const Raw& r) { o.collectives.blocks = read_blocks(r); },
           [](const Options& o) -> ConfigValue {
             return o.collectives.blocks ? int_value(*o.collectives.blocks) : ConfigValue(std::string("auto"));
           }},
    KeyDef{{"runtime.wait_timeout", "COPSE_RUNTIME_WAIT_TIMEOUT", "TIME|none",
            "a blocking wait longer than this fails, naming peer and step; none: wait as long as it takes"},
           [](Options& o, const Raw& r) {
             if (is_text(r) && r.str == "none") {
               o.runtime.wait_timeout.reset();
               return;
             }
             const double t = read_time(r, "60s, or none");
             if (!(t > 0)) throw BadValue{"must be positive (or none); use e.g. 60s"};
             if (t > 1e9) throw BadValue{"too long (at most 1e9 s)"};
             o.runtime.wait_timeout = t;
           },
           [](const Options& o) -> ConfigValue {
             return o.runtime.wait_timeout ? ConfigValue(*o.runtime.wait_timeout) : ConfigValue(std::string("none"));
           }},
    KeyDef{{"runtime.wait_report", "COPSE_RUNTIME_WAIT_REPORT", "TIME",
            "a rank blocked this long says whom it waits for, and again as often (0s: never)"},
           [](Options& o, const Raw& r) {
             const double t = read_time(r, "60s");
             if (t > 1e9) throw BadValue{"too long (at most 1e9 s)"};
             o.runtime.wait_report = t;
           },
           [](const Options& o) -> ConfigValue { return o.runtime.wait_report; }},
    KeyDef{{"runtime.spin", "COPSE_RUNTIME_SPIN", "int >= 0", "spin iterations before a wait blocks"},
           [](Options& o, const Raw& r) { o.runtime.spin = read_int(r, 0); },
           [](const Options& o) { return int_value(o.runtime.spin); }},
    KeyDef{{"mpi.serve", "COPSE_MPI_SERVE", "all|none|C,C,...",
            "the MPI collectives libcopse_mpi.so serves; the others go to the MPI library"},
           [](Options& o, const Raw& r) { o.mpi.serve = read_serve(r); },
           [](const Options& o) -> ConfigValue { return serve_text(o.mpi.serve); }},
    KeyDef{{"mpi.min_bytes", "COPSE_MPI_MIN_BYTES", "SIZE",
            "calls contributing fewer bytes per process go to the MPI library"},
           [](Options& o, const Raw& r) { o.mpi.min_bytes = read_size(r, "4KiB"); },
           [](const Options& o) -> ConfigValue { return static_cast<std::int64_t>(o.mpi.min_bytes); }},
    KeyDef{{"mpi.max_bytes", "COPSE_MPI_MAX_BYTES", "SIZE|none",
            "calls contributing more bytes per process go to the MPI library; none: no bound"},
           [](Options& o, const Raw& r) {
             if (is_text(r) && r.str == "none") {
               o.mpi.max_bytes.reset();
               return;
             }
             o.mpi.max_bytes = read_size(r, "64MiB, or none");
           },
           [](const Options& o) -> ConfigValue {
             return o.mpi.max_bytes ? ConfigValue(static_cast<std::int64_t>(*o.mpi.max_bytes))
                                    : ConfigValue(std::string("none"));
           }},
    KeyDef{{"mpi.stats", "COPSE_MPI_STATS", "FILE",
            "at MPI_Finalize every process appends one JSON line of served and passed calls; empty: none"},
           [](Options& o, const Raw& r) { o.mpi.stats = read_string(r); },
           [](const Options& o) -> ConfigValue { return o.mpi.stats; }},
    KeyDef{{"mpi.cma", "COPSE_MPI_CMA", "auto|on|allgather|off",
            "processes of a node read large messages straight from each other's memory (Linux cross-memory "
            "attach): auto where the kernel allows it, for every collective if its copy costs at most 1.5 "
            "memcpys, else for allgathers alone; on: for every collective wherever the kernel allows it; "
            "allgather: for allgathers alone; off: through the node's segment"},
           [](Options& o, const Raw& r) { o.mpi.cma = read_cma(r); },
           [](const Options& o) -> ConfigValue {
             switch (o.mpi.cma) {
               case CmaMode::automatic: return std::string("auto");
               case CmaMode::on: return std::string("on");
               case CmaMode::allgather: return std::string("allgather");
               case CmaMode::off: break;
             }
             return std::string("off");
           }},
    KeyDef{{"mpi.keep_heap", "COPSE_MPI_KEEP_HEAP", "bool",
            "at MPI_Init set glibc malloc's thresholds to the ceiling its own dynamic ones reach (blocks up to "
            "32 MiB from the heap, up to 64 MiB of freed heap kept mapped), so that the buffers an MPI library "
            "allocates and frees in every call are not handed back to the kernel and faulted in again; false: "
            "malloc as the application left it"},
           [](Options& o, const Raw& r) { o.mpi.keep_heap = read_bool(r); },
           [](const Options& o) -> ConfigValue { return o.mpi.keep_heap; }},
    KeyDef{{"mpi.trace", "COPSE_MPI_TRACE", "FILE",
            "every process records each collective call it makes as one JSON line in this file (replaced at "
            "MPI_Init), for copse replay; empty: none"},
           [](Options& o, const Raw& r) { o.mpi.trace = read_string(r); },
           [](const Options& o) -> ConfigValue { return o.mpi.trace; }},
    KeyDef{{"mpi.table", "COPSE_MPI_TABLE", "FILE|none",
            "the decision table (config/decision_table.hpp): which calls copse serves and which go to the MPI "
            "library, by collective, size and communicator shape; empty: the built-in table; none: no table "
            "(copse serves every call mpi.serve and the byte bounds allow)"},
           [](Options& o, const Raw& r) { o.mpi.table = read_string(r); },
           [](const Options& o) -> ConfigValue { return o.mpi.table; }},
};

constexpr std::size_t kKeyCount = kKeys.size();

constexpr auto kKeyInfo = [] {
  std::array<ConfigKey, kKeyCount> info{};
  for (std::size_t i = 0; i < kKeyCount; ++i) info[i] = kKeys[i].info;
  return info;
}();

}  // namespace

std::span<const KeyDef> key_defs() { return kKeys; }

std::optional<std::size_t> key_index(std::string_view name) {
  for (std::size_t i = 0; i < kKeyCount; ++i)
    if (kKeys[i].info.name == name) return i;
  return std::nullopt;
}

std::optional<std::size_t> env_index(std::string_view name) {
  for (std::size_t i = 0; i < kKeyCount; ++i)
    if (kKeys[i].info.env == name) return i;
  return std::nullopt;
}

}  // namespace copse::config_detail

namespace copse {

std::span<const ConfigKey> config_keys() { return config_detail::kKeyInfo; }

}  // namespace copse
