// Configuration errors: one clear error per invalid value, unknown key or
// unknown COPSE_* variable, naming the key, the value and its source.

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
      {"mpi.serve", "allreduce,alltoallw", "unknown collective \"alltoallw\" (accepted: all, none, or a"},
      {"collectives.scatter", "ring", "unknown scatter algorithm 'ring'"},
      {"collectives.alltoall", "binomial", "unknown alltoall algorithm 'binomial'"},
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
      {"mpi.cma", "false", "expected auto, on, allgather or off"},
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
