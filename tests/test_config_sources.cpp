// Configuration sources and their precedence (default < file < env <
// explicit), the source of every value, and which file is read.

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
#include "tests/config_support.hpp"

using namespace config_test;

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
