#include "config/decision_table.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace copse {

namespace {

// config/default_decisions.toml, embedded by the build as a raw string
// literal (see CMakeLists.txt).
constexpr std::string_view kBuiltinTable =
#include "config/default_decisions.inc"  // generated in the build tree
    ;

constexpr std::string_view kRowKeys[] = {"collective", "form",      "min_bytes", "max_bytes", "min_ranks",
                                         "max_ranks",  "min_nodes", "max_nodes", "min_hosts", "max_hosts",
                                         "use",        "hierarchy", "blocks",    "note",      "shape"};

class Reader {
 public:
  explicit Reader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const toml::node* at, const std::string& reason) const {
    std::string where = "decision table " + source_;
    if (at && at->source().begin.line) where += ", line " + std::to_string(at->source().begin.line);
    throw UsageError(where + ": " + reason);
  }

  Provider provider(const toml::node& node, std::string_view key) const {
    const auto text = node.value<std::string>();
    if (text == "copse") return Provider::copse;
    if (text == "mpi") return Provider::mpi;
    fail(&node, std::string(key) + " must be \"copse\" or \"mpi\"");
  }

  std::uint64_t bytes(const toml::node& node, std::string_view key) const {
    if (const auto n = node.value<std::int64_t>()) {
      if (*n < 0) fail(&node, std::string(key) + " must not be negative");
      return static_cast<std::uint64_t>(*n);
    }
    if (const auto text = node.value<std::string>()) try {
        return parse_size(*text);
      } catch (const UsageError& e) {
        fail(&node, std::string(key) + ": " + e.what());
      }
    fail(&node, std::string(key) + " must be a size (an integer of bytes or a string such as \"64KiB\")");
  }

  int count(const toml::node& node, std::string_view key) const {
    const auto n = node.value<std::int64_t>();
    if (!n || *n < 1 || *n > std::numeric_limits<int>::max())
      fail(&node, std::string(key) + " must be a whole number >= 1");
    return static_cast<int>(*n);
  }

  CallForm form(const toml::node& node) const {
    if (const auto text = node.value<std::string>())
      if (const auto f = call_form_named(*text)) return *f;
    fail(&node, "form must be \"blocking\", \"nonblocking\" or \"persistent\" (absent: every form)");
  }

  Form hierarchy(const toml::node& node) const {
    if (const auto text = node.value<std::string>()) try {
        return parse_form(*text);
      } catch (const UsageError& e) {
        fail(&node, std::string("hierarchy: ") + e.what());
      }
    fail(&node, "hierarchy must be a string: flat, leader, multi-leader, lanes or auto");
  }

  std::optional<MpiCollective> collective(const toml::node& node) const {
    const auto text = node.value<std::string>();
    if (text == "*") return std::nullopt;
    for (MpiCollective c : kMpiCollectives)
      if (text == to_string(c)) return c;
    std::string known;
    for (MpiCollective c : kMpiCollectives) known += std::string(to_string(c)) + ", ";
    fail(&node, "collective must be one of " + known + "or \"*\"");
  }

  DecisionRow row(const toml::table& table) const {
    DecisionRow r;
    r.line = static_cast<int>(table.source().begin.line);
    for (const auto& [key, node] : table)
      if (std::find(std::begin(kRowKeys), std::end(kRowKeys), key.str()) == std::end(kRowKeys))
        fail(&node, "unknown key '" + std::string(key.str()) + "' in a row (known: " + join(kRowKeys, ", ") + ")");
    const toml::node* use = table.get("use");
    if (!use) fail(&table, "a row needs use = \"copse\" or \"mpi\"");
    r.use = provider(*use, "use");
    if (const auto* n = table.get("hierarchy")) {
      if (r.use != Provider::copse) fail(n, "hierarchy is the form copse plans in: only with use = \"copse\"");
      r.hierarchy = hierarchy(*n);
    }
    if (const auto* n = table.get("blocks")) {
      if (r.use != Provider::copse) fail(n, "blocks is the block count copse plans with: only with use = \"copse\"");
      r.blocks = count(*n, "blocks");
    }
    if (const auto* n = table.get("collective")) r.collective = collective(*n);
    if (const auto* n = table.get("form")) r.form = form(*n);
    if (const auto* n = table.get("min_bytes")) r.min_bytes = bytes(*n, "min_bytes");
    if (const auto* n = table.get("max_bytes")) r.max_bytes = bytes(*n, "max_bytes");
    if (const auto* n = table.get("min_ranks")) r.min_ranks = count(*n, "min_ranks");
    if (const auto* n = table.get("max_ranks")) r.max_ranks = count(*n, "max_ranks");
    if (const auto* n = table.get("min_nodes")) r.min_nodes = count(*n, "min_nodes");
    if (const auto* n = table.get("max_nodes")) r.max_nodes = count(*n, "max_nodes");
    if (const auto* n = table.get("min_hosts")) r.min_hosts = count(*n, "min_hosts");
    if (const auto* n = table.get("max_hosts")) r.max_hosts = count(*n, "max_hosts");
    if (const auto* n = table.get("note")) {
      if (!n->is_string()) fail(n, "note must be a string");
      r.note = *n->value<std::string>();
    }
    if (const auto* n = table.get("shape")) {
      if (!n->is_string()) fail(n, "shape must be a string");
      r.shape = *n->value<std::string>();
    }
    if (r.min_bytes > r.max_bytes) fail(&table, "min_bytes is above max_bytes: no call could match");
    if (r.min_ranks > r.max_ranks) fail(&table, "min_ranks is above max_ranks: no call could match");
    if (r.min_nodes > r.max_nodes) fail(&table, "min_nodes is above max_nodes: no call could match");
    if (r.min_hosts > r.max_hosts) fail(&table, "min_hosts is above max_hosts: no call could match");
    return r;
  }

 private:
  const std::string& source_;
};

template <class T>
std::string range(const char* what, T lo, T hi, T none, std::string (*show)(T)) {
  if (lo == 0 && hi == none) return "";
  if (lo == hi) return std::string(" ") + what + " " + show(lo);
  if (hi == none) return std::string(" ") + what + " >= " + show(lo);
  if (lo == 0) return std::string(" ") + what + " <= " + show(hi);
  return std::string(" ") + what + " " + show(lo) + ".." + show(hi);
}

std::string show_int(int v) { return std::to_string(v); }

// A bound as the table's text has it: whole KiB or MiB as SIZE text, the
// rest as an integer of bytes.
std::string size_text(std::uint64_t bytes) {
  if (bytes == 0 || bytes % 1024) return std::to_string(bytes);
  return bytes % (1 << 20) ? "\"" + std::to_string(bytes >> 10) + "KiB\""
                           : "\"" + std::to_string(bytes >> 20) + "MiB\"";
}
std::string show_bytes(std::uint64_t v) { return format_bytes(v); }

}  // namespace

std::string_view to_string(Provider provider) { return provider == Provider::copse ? "copse" : "mpi"; }

std::string_view to_string(CallForm form) {
  switch (form) {
    case CallForm::blocking: return "blocking";
    case CallForm::nonblocking: return "nonblocking";
    case CallForm::persistent: return "persistent";
  }
  return "?";
}

std::optional<CallForm> call_form_named(std::string_view name) {
  for (CallForm f : kCallForms)
    if (name == to_string(f)) return f;
  return std::nullopt;
}

bool DecisionRow::fits(MpiCollective c, CallForm f, int ranks, int nodes, int hosts) const {
  return (!collective || *collective == c) && (!form || *form == f) && ranks >= min_ranks && ranks <= max_ranks &&
         nodes >= min_nodes && nodes <= max_nodes && hosts >= min_hosts && hosts <= max_hosts;
}

bool DecisionRow::matches(const CallShape& call) const {
  return fits(call.collective, call.form, call.ranks, call.nodes, call.hosts) && call.bytes >= min_bytes &&
         call.bytes <= max_bytes;
}

std::size_t DecisionTable::find(const CallShape& call) const {
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const DecisionRow& r) { return r.matches(call); });
  return static_cast<std::size_t>(it - rows.begin());
}

std::vector<std::uint32_t> DecisionTable::rows_for(MpiCollective collective, CallForm form, int ranks, int nodes,
                                                   int hosts) const {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].fits(collective, form, ranks, nodes, hosts)) out.push_back(static_cast<std::uint32_t>(i));
  return out;
}

// " (lanes, 16 blocks)": what a copse row sets beyond the configuration.
static std::string how_copse_plans(const DecisionRow& r) {
  std::vector<std::string> set;
  if (r.hierarchy) set.emplace_back(to_string(*r.hierarchy));
  if (r.blocks) set.push_back(std::to_string(r.blocks) + (r.blocks == 1 ? " block" : " blocks"));
  return set.empty() ? "" : " (" + join(set, ", ") + ")";
}

std::string DecisionTable::describe(const std::vector<std::uint64_t>& calls) const {
  std::ostringstream o;
  const auto counted = [&](std::size_t i) {
    return calls.size() > i ? ", " + std::to_string(calls[i]) + (calls[i] == 1 ? " call" : " calls") : std::string();
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DecisionRow& r = rows[i];
    o << "row " << i + 1 << (r.line ? " (line " + std::to_string(r.line) + ")" : std::string()) << counted(i) << ": "
      << (r.collective ? std::string(to_string(*r.collective)) : std::string("every collective"))
      << (r.form ? " " + std::string(to_string(*r.form)) : std::string())
      << range<std::uint64_t>("bytes", r.min_bytes, r.max_bytes, std::numeric_limits<std::uint64_t>::max(), show_bytes)
      << range<int>("ranks", r.min_ranks, r.max_ranks, std::numeric_limits<int>::max(), show_int)
      << range<int>("nodes", r.min_nodes, r.max_nodes, std::numeric_limits<int>::max(), show_int)
      << range<int>("hosts", r.min_hosts, r.max_hosts, std::numeric_limits<int>::max(), show_int) << " -> "
      << to_string(r.use) << how_copse_plans(r) << (r.note.empty() ? "" : "  # " + r.note) << "\n";
  }
  o << "no row matches" << counted(rows.size()) << " -> " << to_string(fallback) << "\n";
  return o.str();
}

DecisionTable parse_decision_table(std::string_view text, const std::string& source) {
  const Reader read(source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw UsageError("decision table " + source + ", line " + std::to_string(e.source().begin.line) + ": " +
                     std::string(e.description()));
  }
  DecisionTable table;
  table.source = source;
  for (const auto& [key, node] : root) {
    if (key.str() == "default") {
      table.fallback = read.provider(node, "default");
    } else if (key.str() == "row") {
      const auto* rows = node.as_array();
      if (!rows) read.fail(&node, "row must be an array of tables ([[row]])");
      for (const auto& element : *rows) {
        const auto* row = element.as_table();
        if (!row) read.fail(&element, "each row must be a table ([[row]])");
        table.rows.push_back(read.row(*row));
      }
    } else {
      read.fail(&node, "unknown key '" + std::string(key.str()) + "' (expected default and [[row]] tables)");
    }
  }
  return table;
}

std::string write_decision_table(const DecisionTable& table, std::string_view header) {
  std::ostringstream o;
  for (std::size_t at = 0; at < header.size();) {
    const std::size_t end = std::min(header.find('\n', at), header.size());
    o << "# " << header.substr(at, end - at) << "\n";
    at = end + 1;
  }
  o << "default = \"" << to_string(table.fallback) << "\"\n";
  constexpr int none = std::numeric_limits<int>::max();
  for (const DecisionRow& r : table.rows) {
    o << "\n[[row]]\ncollective = " << json_string(r.collective ? to_string(*r.collective) : "*") << "\n";
    if (r.form) o << "form = \"" << to_string(*r.form) << "\"\n";
    if (r.min_bytes) o << "min_bytes = " << size_text(r.min_bytes) << "\n";
    if (r.max_bytes != std::numeric_limits<std::uint64_t>::max()) o << "max_bytes = " << size_text(r.max_bytes) << "\n";
    if (r.min_ranks) o << "min_ranks = " << r.min_ranks << "\n";
    if (r.max_ranks != none) o << "max_ranks = " << r.max_ranks << "\n";
    if (r.min_nodes) o << "min_nodes = " << r.min_nodes << "\n";
    if (r.max_nodes != none) o << "max_nodes = " << r.max_nodes << "\n";
    if (r.min_hosts) o << "min_hosts = " << r.min_hosts << "\n";
    if (r.max_hosts != none) o << "max_hosts = " << r.max_hosts << "\n";
    o << "use = \"" << to_string(r.use) << "\"\n";
    if (r.hierarchy) o << "hierarchy = \"" << to_string(*r.hierarchy) << "\"\n";
    if (r.blocks) o << "blocks = " << r.blocks << "\n";
    if (!r.note.empty()) o << "note = " << json_string(r.note) << "\n";
    if (!r.shape.empty()) o << "shape = " << json_string(r.shape) << "\n";
  }
  return o.str();
}

DecisionTable load_decision_table(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read decision table " + path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_decision_table(text.str(), path);
}

const DecisionTable& builtin_decision_table() {
  static const DecisionTable table = parse_decision_table(kBuiltinTable, "built-in");
  return table;
}

std::optional<DecisionTable> configured_decision_table(const MpiOptions& options) {
  if (options.table == "none") return std::nullopt;
  if (options.table.empty()) return builtin_decision_table();
  return load_decision_table(options.table);
}

}  // namespace copse
