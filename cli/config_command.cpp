// copse config [--config FILE] [--set KEY=VALUE]... [--stats FILE]... [--json]
//
// Loads the configuration exactly as the engine does (defaults < config file
// < COPSE_* environment < explicit settings, here --set) and prints every
// key's effective value, its environment variable and its source, then the
// decision table mpi.table selects, row by row, with --stats the calls each
// row decided in a run (its stats file's counts, summed over processes). Bad input
// (unreadable or malformed file, unknown key or variable, invalid value) is a
// UsageError: one line on stderr, exit 2, as everywhere in the CLI.

#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cli/options.hpp"
#include "common/error.hpp"
#include "config/config.hpp"
#include "config/decision_table.hpp"

namespace copse {
namespace {

// The calls each row of `table` decided, then those no row matched, summed
// over the lines of the stats files (mpi/stats.hpp); each line must count
// for this table (its source and row count).
std::vector<std::uint64_t> decided_calls(const std::vector<std::string>& files, const DecisionTable& table) {
  std::vector<std::uint64_t> calls(table.rows.size() + 1, 0);
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) throw UsageError("cannot read the stats file " + file);
    int number = 0;
    for (std::string line; std::getline(in, line);) {
      ++number;
      if (line.empty()) continue;
      const std::string where = "stats file " + file + ", line " + std::to_string(number) + ": ";
      Json counts;
      try {
        const Json j = Json::parse(line);
        if (!j.contains("table"))
          throw UsageError(where + "no decision table counts (the run had mpi.table = none, or is older)");
        counts = j.at("table");
        if (counts.at("source").get<std::string>() != table.source)
          throw UsageError(where + "its counts are the decision table " + counts.at("source").get<std::string>() +
                           "'s, not " + table.source + "'s (set mpi.table to the run's)");
        if (counts.at("rows").size() != table.rows.size())
          throw UsageError(where + std::to_string(counts.at("rows").size()) + " rows counted, the table " +
                           table.source + " has " + std::to_string(table.rows.size()) + " (was it changed since?)");
        for (std::size_t i = 0; i < table.rows.size(); ++i) calls[i] += counts.at("rows")[i].get<std::uint64_t>();
        calls.back() += counts.at("unmatched").get<std::uint64_t>();
      } catch (const Json::exception& e) {
        throw UsageError(where + "not a stats line (" + e.what() + ")");
      }
    }
  }
  return calls;
}

// The decision table's rows as `copse config --json` shows them, with the
// calls each decided when `calls` has them; null for no table.
Json table_json(const std::optional<DecisionTable>& table, const std::vector<std::uint64_t>& calls) {
  if (!table) return nullptr;
  Json rows = Json::array();
  const auto bound = [](auto v, auto none) { return v == none ? Json(nullptr) : Json(v); };
  for (const DecisionRow& r : table->rows)
    rows.push_back({{"line", r.line},
                    {"collective", r.collective ? Json(std::string(to_string(*r.collective))) : Json("*")},
                    {"form", r.form ? Json(std::string(to_string(*r.form))) : Json(nullptr)},
                    {"min_bytes", r.min_bytes},
                    {"max_bytes", bound(r.max_bytes, std::numeric_limits<std::uint64_t>::max())},
                    {"min_ranks", r.min_ranks},
                    {"max_ranks", bound(r.max_ranks, std::numeric_limits<int>::max())},
                    {"min_nodes", r.min_nodes},
                    {"max_nodes", bound(r.max_nodes, std::numeric_limits<int>::max())},
                    {"min_hosts", r.min_hosts},
                    {"max_hosts", bound(r.max_hosts, std::numeric_limits<int>::max())},
                    {"use", std::string(to_string(r.use))},
                    {"hierarchy", r.hierarchy ? Json(std::string(to_string(*r.hierarchy))) : Json(nullptr)},
                    {"blocks", r.blocks ? Json(r.blocks) : Json(nullptr)},
                    {"note", r.note},
                    {"shape", r.shape}});
  Json out = {{"source", table->source}, {"default", std::string(to_string(table->fallback))}, {"rows", rows}};
  if (!calls.empty()) {
    for (std::size_t i = 0; i < table->rows.size(); ++i) out["rows"][i]["calls"] = calls[i];
    out["unmatched_calls"] = calls.back();
  }
  return out;
}

Json json_value(const ConfigValue& v) {
  return std::visit([](const auto& x) { return Json(x); }, v);
}

int run_config_command(const CLI::App& cmd);

}  // namespace

void add_config_command(CLI::App& app, const Config&, RunParsed& run_parsed) {
  auto* cmd =
      app.add_subcommand("config", "print every configuration value and where it came from (default, file, env, cli)");
  cmd->add_option("--config")
      ->description("config file (default: $COPSE_CONFIG, else ./copse.toml if it exists; \"\": none)")
      ->type_name("FILE");
  cmd->add_option("--set")
      ->description("an explicit setting, above file and environment (repeatable)")
      ->type_name("KEY=VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--stats")
      ->description(
          "a run's stats file (mpi.stats): the calls each row of the table decided, beside the row "
          "(repeatable; summed)")
      ->type_name("FILE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--json")->description("print one JSON object");
  cmd->callback([cmd, &run_parsed] { run_parsed = [cmd] { return run_config_command(*cmd); }; });
}

namespace {

// The configuration is loaded afresh: --set applies to this listing only.
int run_config_command(const CLI::App& cmd) {
  LoadArgs load;
  if (const auto* file = cmd.get_option("--config"); file->count() > 0) load.config_file = file->as<std::string>();
  Config config = Config::load(load);
  for (const std::string& setting : cmd.get_option("--set")->results()) {
    const auto eq = setting.find('=');
    if (eq == std::string::npos) throw UsageError("--set: expected KEY=VALUE, got \"" + setting + "\"");
    config.set(setting.substr(0, eq), setting.substr(eq + 1));
  }
  // Read before anything is printed: a bad table is an error, not a tail.
  const std::optional<DecisionTable> table = configured_decision_table(config.options().mpi);
  const std::vector<std::string> stats = cmd.get_option("--stats")->results();
  if (!stats.empty() && !table)
    throw UsageError("--stats: mpi.table is none: no table whose rows the stats file could count");
  const std::vector<std::uint64_t> calls = stats.empty() ? std::vector<std::uint64_t>{} : decided_calls(stats, *table);

  if (cmd.get_option("--json")->count() > 0) {
    Json settings = Json::object();
    for (const auto& key : config_keys()) {
      const ConfigSource& source = config.source_of(key.name);
      settings[std::string(key.name)] = {{"value", json_value(config.value(key.name))},
                                         {"text", config.value_text(key.name)},
                                         {"env", key.env},
                                         {"type", key.type},
                                         {"source", source.to_string()},
                                         {"source_kind", source.kind_name()}};
    }
    std::cout << Json{{"config_file", config.file() ? Json(*config.file()) : Json(nullptr)},
                      {"config_file_origin", config.file() ? Json(config.file_origin()) : Json(nullptr)},
                      {"settings", settings},
                      {"decision_table", table_json(table, calls)}}
                     .dump(2)
              << "\n";
    return 0;
  }

  if (config.file())
    std::cout << "config file: " << *config.file() << " (from " << config.file_origin() << ")\n";
  else
    std::cout << "config file: none\n";
  // An empty value (hierarchy.node_topology) shows as "".
  const auto shown = [&](std::string_view key) {
    const std::string text = config.value_text(key);
    return text.empty() ? std::string("\"\"") : text;
  };
  std::size_t key_width = 3, value_width = 5, env_width = 8;
  for (const auto& key : config_keys()) {
    key_width = std::max(key_width, key.name.size());
    value_width = std::max(value_width, shown(key.name).size());
    env_width = std::max(env_width, key.env.size());
  }
  std::cout << pad("KEY", key_width + 2) << pad("VALUE", value_width + 2) << pad("VARIABLE", env_width + 2)
            << "SOURCE\n";
  for (const auto& key : config_keys()) {
    std::cout << pad(std::string(key.name), key_width + 2) << pad(shown(key.name), value_width + 2)
              << pad(std::string(key.env), env_width + 2) << config.source_of(key.name).to_string() << "\n";
  }
  // Which calls the interposition library serves and which it leaves to MPI.
  if (table)
    std::cout << "\ndecision table (mpi.table): " << table->source << "\n" << table->describe(calls);
  else
    std::cout << "\ndecision table (mpi.table): none (every call mpi.serve and the byte bounds allow is served)\n";
  return 0;
}

}  // namespace
}  // namespace copse
