// Configuration: defaults, precedence (default < file < env < explicit), the
// source of every value, and one clear error per invalid value, unknown key
// or unknown COPSE_* variable.

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/cost_model.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "config/config.hpp"

extern char** environ;

namespace {

using copse::Config;
using copse::ConfigSource;
using copse::LoadArgs;
using copse::Options;
using copse::UsageError;
using Kind = copse::ConfigSource::Kind;
namespace fs = std::filesystem;

// A fresh directory under the system's temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "copse-config-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to NAME in the directory; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Clears every COPSE_* variable for the test's duration, then restores the
// environment as it was; set() and unset() in between.
class EnvGuard {
 public:
  EnvGuard() {
    for (char** e = environ; e && *e; ++e) {
      if (std::strncmp(*e, "COPSE_", 6) != 0) continue;
      const char* eq = std::strchr(*e, '=');
      if (!eq) continue;
      saved_.emplace_back(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
    }
    for (const auto& [name, value] : saved_) unsetenv(name.c_str());
  }
  ~EnvGuard() {
    for (const auto& name : touched_) unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const std::string& name, const std::string& value) {
    touched_.push_back(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) { unsetenv(name.c_str()); }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
  std::vector<std::string> touched_;
};

// The message of the UsageError that `f` throws (fails the test if none).
template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError thrown");
  return {};
}

// Loads with this file and an explicit (possibly empty) environment.
Config load_with(std::optional<std::string> file, std::vector<std::pair<std::string, std::string>> env = {}) {
  LoadArgs args;
  args.config_file = file ? std::move(*file) : std::string();
  args.environment = std::move(env);
  return Config::load(args);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("config: defaults, every source 'default'", "[config]") {
  const Config config = load_with(std::nullopt);
  CHECK(config.options() == Options{});
  CHECK_FALSE(config.file().has_value());
  for (const auto& key : copse::config_keys()) {
    CHECK(config.source_of(key.name).kind == Kind::default_value);
    CHECK(config.source_of(key.name).to_string() == "default");
  }
  CHECK(Config().options() == Options{});

  const Options o;
  CHECK(o.hierarchy.grouping == "auto");
  CHECK(o.hierarchy.max_group == 4);
  CHECK_FALSE(o.hierarchy.multi_leader);
  CHECK(o.hierarchy.node_topology.empty());
  CHECK(o.collectives.allreduce == "dual-root");
  CHECK(o.collectives.reduce == "binary-tree");
  CHECK(o.collectives.bcast == "binary-tree");
  CHECK(o.collectives.barrier == "dual-root");
  CHECK(o.collectives.allgather == "binary-tree");
  CHECK(o.collectives.reduce_scatter == "binary-tree");
  CHECK(o.hierarchy.ranks_per_node == 0);  // real nodes
  CHECK_FALSE(o.collectives.blocks.has_value());
  CHECK_FALSE(o.runtime.wait_timeout.has_value());  // no deadline: a Comm waits as long as its peer takes
  CHECK_FALSE(o.runtime.wait_timeout_ms().has_value());
  CHECK(o.runtime.wait_report == 60);
  CHECK(o.runtime.wait_report_ms() == std::chrono::milliseconds(60000));
  CHECK(o.runtime.spin == 2000);
  CHECK(o.model.receive_overhead == 0);
  CHECK(config.value_text("runtime.wait_timeout") == "none");
  // The interposition library serves every collective, at any size, and
  // writes no stats file unless asked.
  for (copse::MpiCollective c : copse::kMpiCollectives) CHECK(o.mpi.serves(c));
  CHECK(o.mpi.min_bytes == 0);
  CHECK_FALSE(o.mpi.max_bytes.has_value());
  CHECK(o.mpi.stats.empty());
  CHECK(o.mpi.cma == copse::CmaMode::automatic);
  CHECK(config.value_text("mpi.cma") == "auto");
  CHECK(config.value_text("mpi.serve") == "all");
  CHECK(config.value_text("mpi.max_bytes") == "none");
}

TEST_CASE("config: mpi.serve takes all, none or a list, and writes it back in one order", "[config]") {
  using copse::MpiCollective;
  Config config;
  config.set("mpi.serve", "bcast,allreduce");
  const copse::MpiOptions& m = config.options().mpi;
  CHECK(m.serves(MpiCollective::allreduce));
  CHECK(m.serves(MpiCollective::bcast));
  CHECK_FALSE(m.serves(MpiCollective::reduce));
  CHECK_FALSE(m.serves(MpiCollective::reduce_scatter_block));
  CHECK(config.value_text("mpi.serve") == "allreduce,bcast");
  config.set("mpi.serve", "reduce_scatter_block");  // not reduce_scatter: two entry points, two names
  CHECK(config.options().mpi.serves(MpiCollective::reduce_scatter_block));
  CHECK_FALSE(config.options().mpi.serves(MpiCollective::reduce_scatter));
  config.set("mpi.serve", "none");
  for (MpiCollective c : copse::kMpiCollectives) CHECK_FALSE(config.options().mpi.serves(c));
  CHECK(config.value_text("mpi.serve") == "none");
  config.set("mpi.serve", "allreduce,reduce,bcast,barrier,allgather,reduce_scatter_block,reduce_scatter");
  CHECK(config.value_text("mpi.serve") == "all");
  std::vector<std::string> names;
  for (MpiCollective c : copse::kMpiCollectives) names.emplace_back(copse::to_string(c));
  CHECK(names == std::vector<std::string>{"allreduce", "reduce", "bcast", "barrier", "allgather",
                                          "reduce_scatter_block", "reduce_scatter"});
}

TEST_CASE("config: mpi byte bounds are SIZEs, the upper one also none", "[config]") {
  Config config;
  config.set("mpi.min_bytes", "4KiB");
  config.set("mpi.max_bytes", "1.5MiB");
  CHECK(config.options().mpi.min_bytes == 4096);
  CHECK(config.options().mpi.max_bytes == 1572864);
  CHECK(config.value_text("mpi.min_bytes") == "4096");
  CHECK(std::get<std::int64_t>(config.value("mpi.max_bytes")) == 1572864);
  config.set("mpi.max_bytes", "none");
  CHECK_FALSE(config.options().mpi.max_bytes.has_value());
  config.set("mpi.max_bytes", "0");  // a bound of zero bytes: only empty calls are served
  CHECK(config.options().mpi.max_bytes == 0);
  config.set("mpi.stats", "/tmp/stats.jsonl");
  CHECK(config.options().mpi.stats == "/tmp/stats.jsonl");
  config.set("mpi.cma", "off");
  CHECK(config.options().mpi.cma == copse::CmaMode::off);
  CHECK(config.value_text("mpi.cma") == "off");
  config.set("mpi.cma", "on");
  CHECK(config.options().mpi.cma == copse::CmaMode::on);
  CHECK(config.value_text("mpi.cma") == "on");
  CHECK_THROWS_WITH(config.set("mpi.cma", "yes"), Catch::Contains("expected auto, on or off"));
}

TEST_CASE("config: wait_timeout takes a time or none", "[config]") {
  Config config;
  config.set("runtime.wait_timeout", "1.5s");
  CHECK(config.options().runtime.wait_timeout == 1.5);
  CHECK(config.options().runtime.wait_timeout_ms() == std::chrono::milliseconds(1500));
  CHECK(config.value_text("runtime.wait_timeout") == "1.5s");
  config.set("runtime.wait_timeout", "none");
  CHECK_FALSE(config.options().runtime.wait_timeout.has_value());
  config.set("runtime.wait_report", "0s");
  CHECK(config.options().runtime.wait_report == 0);
}

TEST_CASE("config: make_team_options carries every setting into TeamOptions", "[config]") {
  Config config;
  config.set("hierarchy.node_topology", "package:2 core:2 pu:1");
  config.set("hierarchy.grouping", "size:2");
  config.set("hierarchy.max_group", "3");
  config.set("hierarchy.multi_leader", "true");
  config.set("collectives.allreduce", "ring");
  config.set("collectives.reduce", "chain");
  config.set("collectives.bcast", "binomial");
  config.set("collectives.barrier", "recursive-doubling");
  config.set("collectives.allgather", "binomial");
  config.set("collectives.reduce_scatter", "binomial");
  config.set("collectives.blocks", "7");
  config.set("model.inter_alpha", "3us");
  config.set("runtime.wait_timeout", "2s");
  config.set("runtime.wait_report", "5s");
  const int sizes[] = {4, 3};
  const copse::TeamOptions team = copse::make_team_options(config.options(), sizes);
  REQUIRE(team.nodes.size() == 2);
  CHECK(team.nodes[0].ranks == 4);
  CHECK(team.nodes[1].ranks == 3);
  CHECK(team.nodes[0].machine.pus() == 4);
  CHECK(team.grouping.to_string() == "size:2");
  CHECK(team.grouping.max_group == 3);
  CHECK(team.multi_leader);
  CHECK(team.allreduce == "ring");
  CHECK(team.reduce == "chain");
  CHECK(team.bcast == "binomial");
  CHECK(team.barrier == "recursive-doubling");
  CHECK(team.allgather == "binomial");
  CHECK(team.reduce_scatter == "binomial");
  CHECK(team.blocks == 7);
  CHECK(team.model.level(1).alpha == 3e-6);
  CHECK(team.wait_timeout == std::chrono::milliseconds(2000));
  CHECK(team.wait_report == std::chrono::milliseconds(5000));

  // Defaults: the team's own (one place for each).
  const copse::TeamOptions plain = copse::make_team_options(Options{}, sizes);
  const copse::TeamOptions reference;
  CHECK(plain.allreduce == reference.allreduce);
  CHECK(plain.reduce == reference.reduce);
  CHECK(plain.bcast == reference.bcast);
  CHECK(plain.barrier == reference.barrier);
  CHECK(plain.allgather == reference.allgather);
  CHECK(plain.reduce_scatter == reference.reduce_scatter);
  CHECK(plain.grouping.to_string() == reference.grouping.to_string());
  CHECK(plain.grouping.max_group == reference.grouping.max_group);
  CHECK(plain.wait_timeout == reference.wait_timeout);
  CHECK(plain.wait_report == reference.wait_report);
  CHECK(plain.blocks == reference.blocks);

  CHECK_THROWS_AS(copse::make_team_options(Options{}, std::span<const int>{}), copse::UsageError);
  const int empty_node[] = {2, 0};
  CHECK_THROWS_AS(copse::make_team_options(Options{}, empty_node), copse::UsageError);
}

TEST_CASE("config: model defaults equal CostModel()'s", "[config]") {
  const copse::CostModel reference;
  const copse::CostModel made = copse::make_cost_model(Options{}.model);
  REQUIRE(made.levels() == 2);
  REQUIRE(reference.levels() == 2);
  for (int level = 0; level < 2; ++level) {
    CHECK(made.level(level).alpha == reference.level(level).alpha);
    CHECK(made.level(level).beta == reference.level(level).beta);
  }
  CHECK(made.gamma() == reference.gamma());
  CHECK(made.ports() == reference.ports());
  CHECK(Config().cost_model().transfer(1, 1000) == reference.transfer(1, 1000));
}

TEST_CASE("config: every key listed once, with its variable", "[config]") {
  const auto keys = copse::config_keys();
  CHECK(keys.size() == 39);
  std::vector<std::string> names;
  for (const auto& key : keys) {
    names.emplace_back(key.name);
    std::string env = "COPSE_" + std::string(key.name);
    for (char& c : env) c = c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    CHECK(key.env == env);
    CHECK_FALSE(key.description.empty());
  }
  std::sort(names.begin(), names.end());
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST_CASE("config: the file overrides defaults", "[config]") {
  TempDir dir;
  const std::string path = dir.write("copse.toml", R"(
# a comment
[model]
intra_alpha = "300ns"
inter_beta = "0.2ns"
gamma = 5e-11            # a TOML number is seconds
ports = "uni"
receive_overhead = "2us"

[hierarchy]
grouping = "size:2"
max_group = 8
multi_leader = true
node_topology = "package:2 l3:1 core:4 pu:1"
ranks_per_node = 3

[collectives]
allreduce = "ring"
reduce = "chain"
bcast = "binomial"
barrier = "binomial"
allgather = "binomial"
reduce_scatter = "ring"
blocks = 16

[runtime]
wait_timeout = 30
spin = 0

[mpi]
serve = "allreduce,reduce_scatter"
min_bytes = 64         # a TOML integer is bytes
max_bytes = "1MiB"
stats = "copse-stats.jsonl"
)");
  const Config config = load_with(path);
  const Options& o = config.options();
  CHECK(o.model.intra_alpha == copse::parse_time("300ns"));
  CHECK(o.model.intra_beta == Options{}.model.intra_beta);
  CHECK(o.model.inter_beta == copse::parse_time("0.2ns"));
  CHECK(o.model.gamma == 5e-11);
  CHECK(o.model.ports == copse::Ports::unidirectional);
  CHECK(o.model.receive_overhead == copse::parse_time("2us"));
  CHECK(o.hierarchy.grouping == "size:2");
  CHECK(o.hierarchy.max_group == 8);
  CHECK(o.hierarchy.multi_leader);
  CHECK(o.hierarchy.node_topology == "package:2 l3:1 core:4 pu:1");
  CHECK(o.collectives.allreduce == "ring");
  CHECK(o.collectives.reduce == "chain");
  CHECK(o.collectives.bcast == "binomial");
  CHECK(o.collectives.barrier == "binomial");
  CHECK(o.collectives.allgather == "binomial");
  CHECK(o.collectives.reduce_scatter == "ring");
  CHECK(o.collectives.blocks == 16);
  CHECK(o.hierarchy.ranks_per_node == 3);
  CHECK(o.runtime.wait_timeout == 30);
  CHECK(o.runtime.spin == 0);
  CHECK(config.value_text("mpi.serve") == "allreduce,reduce_scatter");
  CHECK(o.mpi.min_bytes == 64);
  CHECK(o.mpi.max_bytes == 1048576);
  CHECK(o.mpi.stats == "copse-stats.jsonl");

  REQUIRE(config.file() == path);
  CHECK(config.file_origin() == "--config");
  CHECK(config.source_of("model.intra_alpha") == ConfigSource{Kind::file, path});
  CHECK(config.source_of("model.intra_alpha").to_string() == "file " + path);
  CHECK(config.source_of("model.intra_beta").kind == Kind::default_value);
  CHECK(config.source_of("runtime.spin").kind == Kind::file);

  const copse::CostModel model = config.cost_model();
  CHECK(model.level(0).alpha == copse::parse_time("300ns"));
  CHECK(model.ports() == copse::Ports::unidirectional);
  CHECK(&o.collectives.algorithm(copse::Collective::allreduce) ==
        &copse::find_algorithm(copse::Collective::allreduce, "ring"));
}

TEST_CASE("config: blocks may be auto in the file, and dotted keys and inline tables work", "[config]") {
  TempDir dir;
  const Config a = load_with(dir.write("a.toml", "collectives.blocks = \"auto\"\nmodel = { gamma = \"1ps\" }\n"));
  CHECK_FALSE(a.options().collectives.blocks.has_value());
  CHECK(a.source_of("collectives.blocks").kind == Kind::file);
  CHECK(a.options().model.gamma == copse::parse_time("1ps"));
}

TEST_CASE("config: the environment overrides the file, explicit settings override both", "[config]") {
  EnvGuard env;
  TempDir dir;
  const std::string path =
      dir.write("c.toml", "[model]\ninter_alpha = \"2us\"\ngamma = \"30ps\"\n[runtime]\nspin = 10\n");
  env.set("COPSE_MODEL_INTER_ALPHA", "3us");
  env.set("COPSE_HIERARCHY_MULTI_LEADER", "yes");
  env.set("COPSE_COLLECTIVES_BLOCKS", "auto");

  LoadArgs args;
  args.config_file = path;
  Config config = Config::load(args);  // the real environment
  CHECK(config.options().model.inter_alpha == copse::parse_time("3us"));
  CHECK(config.source_of("model.inter_alpha") == ConfigSource{Kind::env, "COPSE_MODEL_INTER_ALPHA"});
  CHECK(config.source_of("model.inter_alpha").to_string() == "env COPSE_MODEL_INTER_ALPHA");
  CHECK(config.options().model.gamma == copse::parse_time("30ps"));
  CHECK(config.source_of("model.gamma").kind == Kind::file);
  CHECK(config.options().hierarchy.multi_leader);
  CHECK(config.source_of("hierarchy.multi_leader").kind == Kind::env);
  CHECK(config.source_of("collectives.blocks").kind == Kind::env);
  CHECK(config.options().runtime.spin == 10);
  CHECK(config.source_of("runtime.wait_timeout").kind == Kind::default_value);

  config.set("model.inter_alpha", "4us");
  config.set("runtime.spin", "7");
  config.set("model.intra_beta", "1ps");
  CHECK(config.options().model.inter_alpha == copse::parse_time("4us"));
  CHECK(config.source_of("model.inter_alpha").kind == Kind::explicit_setting);
  CHECK(config.source_of("model.inter_alpha").to_string() == "cli");
  CHECK(config.options().runtime.spin == 7);
  CHECK(config.source_of("runtime.spin").to_string() == "cli");
  CHECK(config.options().model.intra_beta == copse::parse_time("1ps"));
  CHECK(config.source_of("model.gamma").kind == Kind::file);  // untouched
}

TEST_CASE("config: an injected environment replaces the process's", "[config]") {
  EnvGuard env;
  env.set("COPSE_RUNTIME_SPIN", "not a number");  // ignored: the injected environment wins
  const Config config = load_with(std::nullopt, {{"COPSE_RUNTIME_SPIN", "5"}, {"PATH", "/bin"}});
  CHECK(config.options().runtime.spin == 5);
  CHECK(config.source_of("runtime.spin").to_string() == "env COPSE_RUNTIME_SPIN");
}

TEST_CASE("config: environment booleans, ports spellings, grouping forms", "[config]") {
  for (const auto& [text, value] : std::vector<std::pair<std::string, bool>>{{"true", true},
                                                                             {"1", true},
                                                                             {"yes", true},
                                                                             {"on", true},
                                                                             {"false", false},
                                                                             {"0", false},
                                                                             {"no", false},
                                                                             {"off", false}}) {
    INFO(text);
    CHECK(load_with(std::nullopt, {{"COPSE_HIERARCHY_MULTI_LEADER", text}}).options().hierarchy.multi_leader == value);
  }
  for (const auto& [text, ports] :
       std::vector<std::pair<std::string, copse::Ports>>{{"bi", copse::Ports::bidirectional},
                                                         {"bidirectional", copse::Ports::bidirectional},
                                                         {"uni", copse::Ports::unidirectional},
                                                         {"unidirectional", copse::Ports::unidirectional}}) {
    INFO(text);
    CHECK(load_with(std::nullopt, {{"COPSE_MODEL_PORTS", text}}).options().model.ports == ports);
  }
  for (const std::string g : {"auto", "numa", "package", "l3", "l2", "core", "size:1", "size:4", "size:64"}) {
    INFO(g);
    CHECK(load_with(std::nullopt, {{"COPSE_HIERARCHY_GROUPING", g}}).options().hierarchy.grouping == g);
  }
  // An empty node topology is a value (detect), not an error.
  CHECK(load_with(std::nullopt, {{"COPSE_HIERARCHY_NODE_TOPOLOGY", ""}}).source_of("hierarchy.node_topology").kind ==
        Kind::env);
}

namespace {

struct BadCase {
  std::string key;
  std::string value;  // environment text, or a TOML value for the file
  std::string why;    // part of the reason the error gives
};

std::string env_name(const std::string& key) {
  for (const auto& k : copse::config_keys())
    if (k.name == key) return std::string(k.env);
  FAIL("no such key " << key);
  return {};
}

}  // namespace

TEST_CASE("config: every invalid environment value names key, value and variable", "[config]") {
  const std::vector<BadCase> cases = {
      {"model.intra_alpha", "fast", "not a time"},
      {"model.intra_beta", "-1ps", "not a time"},
      {"model.inter_alpha", "1.5 us", "not a time"},
      {"model.inter_beta", "", "not a time"},
      {"model.gamma", "25xs", "not a time"},
      {"model.receive_overhead", "1e999", "not a time"},
      {"model.ports", "both", "expected bi or uni"},
      {"hierarchy.grouping", "l4", "unknown grouping \"l4\" (accepted: auto, core, l2, l3, numa, package, size:K"},
      {"hierarchy.grouping", "size:0", "K in size:K must be a whole number >= 1"},
      {"hierarchy.grouping", "size:", "size:K"},
      {"hierarchy.grouping", "size:2x", "size:K"},
      {"hierarchy.max_group", "0", "whole number >= 1"},
      {"hierarchy.max_group", "four", "whole number >= 1"},
      {"hierarchy.max_group", "4.5", "whole number >= 1"},
      {"hierarchy.max_group", "99999999999", "out of range"},
      {"hierarchy.max_group", "999999999999999999999", "out of range"},
      {"hierarchy.multi_leader", "maybe", "expected true or false"},
      {"collectives.allreduce", "nosuch", "unknown allreduce algorithm 'nosuch'"},
      {"collectives.reduce", "dual-root", "unknown reduce algorithm 'dual-root'"},
      {"collectives.bcast", "ring", "unknown bcast algorithm 'ring'"},
      {"collectives.blocks", "0", "expected auto or a whole number >= 1"},
      {"collectives.blocks", "many", "expected auto or a whole number >= 1"},
      {"runtime.wait_timeout", "0s", "must be positive"},
      {"runtime.wait_timeout", "2e9s", "too long"},
      {"runtime.wait_timeout", "soon", "not a time"},
      {"runtime.wait_timeout", "never", "use e.g. 60s, or none"},
      {"runtime.wait_report", "-1s", "not a time"},
      {"runtime.wait_report", "2e9s", "too long"},
      {"runtime.spin", "-1", "whole number >= 0"},
      {"hierarchy.ranks_per_node", "-1", "whole number >= 0"},
      {"hierarchy.ranks_per_node", "two", "whole number >= 0"},
      {"collectives.barrier", "ring", "unknown barrier algorithm 'ring'"},
      {"collectives.allgather", "dual-root", "unknown allgather algorithm 'dual-root'"},
      {"collectives.reduce_scatter", "two-tree", "unknown reduce_scatter algorithm 'two-tree'"},
      {"mpi.serve", "allreduce,alltoall", "unknown collective \"alltoall\" (accepted: all, none, or a"},
      {"mpi.serve", "allreduce,", "an empty name"},
      {"mpi.serve", "", "an empty name"},
      {"mpi.serve", "Allreduce", "unknown collective \"Allreduce\""},
      {"mpi.min_bytes", "4 KiB", "use e.g. 4KiB"},
      {"mpi.min_bytes", "-1", "use e.g. 4KiB"},
      {"mpi.min_bytes", "10EiB", "use e.g. 4KiB"},
      {"mpi.max_bytes", "lots", "use e.g. 64MiB, or none"},
      {"mpi.max_bytes", "9223372036854775808", "too large"},
  };
  for (const auto& c : cases) {
    const std::string env = env_name(c.key);
    const std::string message = usage_error([&] { load_with(std::nullopt, {{env, c.value}}); });
    INFO(message);
    CHECK(contains(message, c.key + " = \"" + c.value + "\" (from env " + env + "): "));
    CHECK(contains(message, c.why));
    CHECK(message.find('\n') == std::string::npos);

    // The same text through an explicit setting names "cli".
    Config config;
    const std::string explicit_message = usage_error([&] { config.set(c.key, c.value); });
    CHECK(contains(explicit_message, c.key + " = \"" + c.value + "\" (from cli): "));
    CHECK(config.options() == Options{});  // nothing changed
    CHECK(config.source_of(c.key).kind == Kind::default_value);
  }
}

TEST_CASE("config: the brief's example error, word for word", "[config]") {
  const std::string message = usage_error([] { load_with(std::nullopt, {{"COPSE_MODEL_INTER_ALPHA", "fast"}}); });
  CHECK(message.rfind("model.inter_alpha = \"fast\" (from env COPSE_MODEL_INTER_ALPHA): not a time", 0) == 0);
  CHECK(contains(message, "use e.g. 1.5us"));
}

TEST_CASE("config: every invalid file value names key, value, file and line", "[config]") {
  TempDir dir;
  const std::vector<BadCase> cases = {
      {"model.intra_alpha", "\"fast\"", "not a time"},
      {"model.intra_beta", "-1", "not a time"},
      {"model.inter_alpha", "true", "not a time (got a boolean)"},
      {"model.inter_beta", "[1, 2]", "model.inter_beta = [...] (from file"},
      {"model.gamma", "nan", "not a time"},
      {"model.receive_overhead", "-0.5", "not a time"},
      {"model.ports", "2", "expected bi or uni"},
      {"hierarchy.grouping", "4", "expected a string (got an integer)"},
      {"hierarchy.grouping", "\"size:-1\"", "size:K"},
      {"hierarchy.max_group", "\"4\"", "whole number >= 1 (got a string)"},
      {"hierarchy.max_group", "0", "whole number >= 1"},
      {"hierarchy.max_group", "4.0", "(got a floating-point number)"},
      {"hierarchy.multi_leader", "\"true\"", "expected true or false (got a string)"},
      {"hierarchy.multi_leader", "1", "expected true or false (got an integer)"},
      {"hierarchy.node_topology", "5", "expected a string (got an integer)"},
      {"collectives.allreduce", "\"nosuch\"", "unknown allreduce algorithm"},
      {"collectives.reduce", "1", "expected a string"},
      {"collectives.bcast", "\"two-tree\"", "unknown bcast algorithm"},
      {"collectives.blocks", "0", "expected auto or a whole number >= 1"},
      {"collectives.blocks", "1.5", "expected auto or a whole number >= 1"},
      {"collectives.blocks", "\"8\"", "expected auto or a whole number >= 1"},
      {"runtime.wait_timeout", "0", "must be positive"},
      {"runtime.wait_timeout", "1979-05-27", "runtime.wait_timeout = 1979-05-27 (from file"},
      {"runtime.spin", "-1", "whole number >= 0"},
      {"runtime.spin", "3000000000", "out of range"},
      {"runtime.spin", "{ a = 1 }", "(got a table)"},
      {"runtime.spin", "[1]", "(got an array)"},
      {"runtime.wait_timeout", "07:32:00", "(got a date or time)"},
      {"hierarchy.ranks_per_node", "\"2\"", "whole number >= 0 (got a string)"},
      {"collectives.allgather", "\"ring-ish\"", "unknown allgather algorithm"},
      {"mpi.serve", "[\"allreduce\"]", "expected a string (got an array)"},
      {"mpi.min_bytes", "-1", "expected a size in bytes (got an integer)"},
      {"mpi.max_bytes", "1.5", "expected a size in bytes (got a floating-point number)"},
      {"mpi.max_bytes", "\"1.5\"", "not a whole number"},
      {"mpi.stats", "true", "expected a string (got a boolean)"},
      {"mpi.cma", "false", "expected auto, on or off"},
  };
  for (const auto& c : cases) {
    const auto dot = c.key.find('.');
    const std::string path =
        dir.write("bad.toml", "\n[" + c.key.substr(0, dot) + "]\n" + c.key.substr(dot + 1) + " = " + c.value + "\n");
    const std::string message = usage_error([&] { load_with(path); });
    INFO(message);
    CHECK(contains(message, c.key + " = "));
    CHECK(contains(message, "(from file " + path + ", line 3): "));
    CHECK(contains(message, c.why));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("config: unknown keys and sections in the file are named", "[config]") {
  TempDir dir;
  SECTION("a misspelt key, with a suggestion") {
    const std::string path = dir.write("k.toml", "[model]\ngama = \"1ps\"\n");
    const std::string message = usage_error([&] { load_with(path); });
    CHECK(contains(message, "unknown key model.gama (did you mean model.gamma?) in config file " + path));
  }
  SECTION("an unknown section names its keys") {
    const std::string path = dir.write("s.toml", "[modle]\ngamma = \"1ps\"\n[runtime]\nspinn = 3\n");
    const std::string message = usage_error([&] { load_with(path); });
    CHECK(contains(
        message,
        "unknown keys modle.gamma (did you mean model.gamma?), runtime.spinn (did you mean runtime.spin?) in config"));
  }
  SECTION("a top-level key") {
    const std::string path = dir.write("t.toml", "gamma = 1\n");
    CHECK(contains(usage_error([&] { load_with(path); }), "unknown key gamma"));
  }
  SECTION("a known section that is not a table") {
    const std::string path = dir.write("n.toml", "model = 3\n");
    CHECK(contains(usage_error([&] { load_with(path); }), "model must be a table"));
  }
  SECTION("a key nested too deep") {
    const std::string path = dir.write("d.toml", "[model.intra]\nalpha = \"1ns\"\n");
    CHECK(contains(usage_error([&] { load_with(path); }), "unknown key model.intra"));
  }
  SECTION("a typo is reported even when another value is also bad") {
    const std::string path = dir.write("b.toml", "[model]\ngamma = \"fast\"\nportz = \"bi\"\n");
    CHECK(contains(usage_error([&] { load_with(path); }), "unknown key model.portz"));
  }
}

TEST_CASE("config: unknown COPSE variables are named, but COPSE_CONFIG is not one", "[config]") {
  const std::string one = usage_error([] { load_with(std::nullopt, {{"COPSE_MODEL_GAMA", "1ps"}}); });
  CHECK(contains(one, "unknown environment variable COPSE_MODEL_GAMA (did you mean COPSE_MODEL_GAMMA?)"));
  const std::string two = usage_error([] {
    load_with(std::nullopt, {{"COPSE_X", "1"}, {"COPSE_RUNTIME_SPINS", "1"}});
  });
  CHECK(contains(two, "unknown environment variables COPSE_RUNTIME_SPINS (did you mean COPSE_RUNTIME_SPIN?), COPSE_X"));
  CHECK(contains(two, "known: COPSE_CONFIG, COPSE_MODEL_INTRA_ALPHA"));

  // Not COPSE_-prefixed, or COPSE_CONFIG: not ours to judge.
  CHECK_NOTHROW(load_with(std::nullopt, {{"COPSE", "/bin/copse"}, {"copse_model_gama", "x"}}));
  TempDir dir;
  const std::string path = dir.write("e.toml", "");
  CHECK_NOTHROW(load_with(path, {{"COPSE_CONFIG", path}}));

  // The process's environment too.
  EnvGuard env;
  env.set("COPSE_RUNTIME_SPINN", "3");
  LoadArgs args;
  args.config_file = "";
  CHECK(contains(usage_error([&] { Config::load(args); }), "unknown environment variable COPSE_RUNTIME_SPINN"));
}

TEST_CASE("config: source_of and value for unknown keys, set on unknown keys", "[config]") {
  Config config;
  CHECK(contains(usage_error([&] { (void)config.source_of("model.gama"); }), "unknown key model.gama"));
  CHECK(contains(usage_error([&] { (void)config.value("nope"); }), "unknown key nope"));
  CHECK(contains(usage_error([&] { config.set("runtime.spinn", "1"); }),
                 "unknown key runtime.spinn (did you mean runtime.spin?)"));
}

TEST_CASE("config: which file is read", "[config]") {
  EnvGuard env;
  TempDir dir;
  const std::string a = dir.write("a.toml", "[runtime]\nspin = 1\n");
  const std::string b = dir.write("b.toml", "[runtime]\nspin = 2\n");

  SECTION("COPSE_CONFIG names the file") {
    env.set("COPSE_CONFIG", a);
    const Config config = Config::load();
    CHECK(config.options().runtime.spin == 1);
    CHECK(config.file() == a);
    CHECK(config.file_origin() == "env COPSE_CONFIG");
    CHECK(config.source_of("runtime.spin").to_string() == "file " + a);
  }
  SECTION("an explicit file beats COPSE_CONFIG") {
    env.set("COPSE_CONFIG", a);
    LoadArgs args;
    args.config_file = b;
    CHECK(Config::load(args).options().runtime.spin == 2);
  }
  SECTION("./copse.toml when present, nothing when absent") {
    const fs::path before = fs::current_path();
    struct Restore {
      fs::path to;
      ~Restore() { fs::current_path(to); }
    } restore{before};
    const fs::path empty = dir.path() / "empty";
    fs::create_directory(empty);
    fs::current_path(empty);
    CHECK_FALSE(Config::load().file().has_value());

    fs::current_path(dir.path());
    dir.write("copse.toml", "[runtime]\nspin = 3\n");
    const Config config = Config::load();
    CHECK(config.options().runtime.spin == 3);
    CHECK(config.file() == "./copse.toml");
    CHECK(config.file_origin() == "working directory");

    env.set("COPSE_CONFIG", "");  // empty: no file, not even ./copse.toml
    CHECK_FALSE(Config::load().file().has_value());
  }
  SECTION("a named file must exist") {
    LoadArgs args;
    args.config_file = (dir.path() / "missing.toml").string();
    CHECK(contains(usage_error([&] { Config::load(args); }), "cannot read config file"));
    CHECK(contains(usage_error([&] { Config::load(args); }), "missing.toml\" (from --config)"));
    env.set("COPSE_CONFIG", *args.config_file);
    CHECK(contains(usage_error([&] { Config::load(); }), "(from env COPSE_CONFIG)"));
    args.config_file = dir.path().string();
    CHECK(contains(usage_error([&] { Config::load(args); }), "cannot read config file"));
  }
  SECTION("malformed TOML names file and line") {
    const std::string bad = dir.write("bad.toml", "[model]\ngamma = \"1ps\"\ngamma = \"2ps\"\n");
    LoadArgs args;
    args.config_file = bad;
    const std::string message = usage_error([&] { Config::load(args); });
    CHECK(contains(message, "config file " + bad + ", line 3"));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("config: exact_time_text reads back exactly", "[config]") {
  CHECK(copse::exact_time_text(0) == "0s");
  CHECK(copse::exact_time_text(2e-7) == "200ns");
  CHECK(copse::exact_time_text(5e-11) == "50ps");
  CHECK(copse::exact_time_text(1.5e-6) == "1.5us");
  CHECK(copse::exact_time_text(1e-10) == "100ps");
  CHECK(copse::exact_time_text(2.5e-11) == "25ps");
  CHECK(copse::exact_time_text(60) == "60s");
  CHECK(copse::exact_time_text(1234.5) == "1234.5s");
  CHECK(copse::exact_time_text(1e-3) == "1ms");
  CHECK(copse::exact_time_text(1.25e-15) == "0.00125ps");
  for (double t : {0.1, 1e-9, 3.3e-7, 1.0 / 3, 123456789.123, 7e-13, 1e-300, 1e300, 2.2250738585072014e-308}) {
    INFO(t);
    CHECK(copse::parse_time(copse::exact_time_text(t)) == t);
  }
}

TEST_CASE("config: value_text is accepted back by set() unchanged", "[config]") {
  TempDir dir;
  Config config = load_with(dir.write("v.toml", R"(
[model]
inter_alpha = 1.234567e-6
ports = "unidirectional"
[hierarchy]
grouping = "size:3"
multi_leader = true
node_topology = "package:2 core:4 pu:1"
[collectives]
blocks = 12
[mpi]
serve = "barrier,allgather"
max_bytes = "64KiB"
stats = "s.jsonl"
)"));
  const Options before = config.options();
  for (const auto& key : copse::config_keys()) config.set(key.name, config.value_text(key.name));
  CHECK(config.options() == before);
  CHECK(config.value_text("model.ports") == "uni");
  CHECK(config.value_text("collectives.blocks") == "12");
  CHECK(config.value_text("hierarchy.multi_leader") == "true");
  CHECK(std::get<double>(config.value("model.inter_alpha")) == 1.234567e-6);
  CHECK(std::get<std::int64_t>(config.value("collectives.blocks")) == 12);
  CHECK(std::get<std::string>(Config().value("collectives.blocks")) == "auto");
}

TEST_CASE("config: wait_timeout_ms rounds up to whole milliseconds", "[config]") {
  copse::RuntimeOptions r;
  r.wait_timeout = 0.0001;
  CHECK(r.wait_timeout_ms() == std::chrono::milliseconds(1));
  r.wait_timeout = 2.5;
  CHECK(r.wait_timeout_ms() == std::chrono::milliseconds(2500));
  r.wait_report = 0.0001;
  CHECK(r.wait_report_ms() == std::chrono::milliseconds(1));
}
