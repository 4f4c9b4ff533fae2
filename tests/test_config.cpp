// Configuration: defaults, what each key accepts and writes back, and
// Options carried into TeamOptions and the cost model. Sources and their
// precedence: test_config_sources.cpp; errors: test_config_errors.cpp.

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
  CHECK(o.mpi.keep_heap);
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
  config.set("mpi.serve",
             "allreduce,reduce,bcast,barrier,allgather,reduce_scatter_block,reduce_scatter,scatter,gather,alltoall,"
             "allgatherv,gatherv,scatterv,alltoallv");
  CHECK(config.value_text("mpi.serve") == "all");
  std::vector<std::string> names;
  for (MpiCollective c : copse::kMpiCollectives) names.emplace_back(copse::to_string(c));
  CHECK(names == std::vector<std::string>{"allreduce", "reduce", "bcast", "barrier", "allgather",
                                          "reduce_scatter_block", "reduce_scatter", "scatter", "gather", "alltoall",
                                          "allgatherv", "gatherv", "scatterv", "alltoallv"});
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
  config.set("mpi.keep_heap", "false");
  CHECK_FALSE(config.options().mpi.keep_heap);
  CHECK(config.value_text("mpi.keep_heap") == "false");
  config.set("mpi.cma", "off");
  CHECK(config.options().mpi.cma == copse::CmaMode::off);
  CHECK(config.value_text("mpi.cma") == "off");
  config.set("mpi.cma", "on");
  CHECK(config.options().mpi.cma == copse::CmaMode::on);
  CHECK(config.value_text("mpi.cma") == "on");
  config.set("mpi.cma", "allgather");
  CHECK(config.options().mpi.cma == copse::CmaMode::allgather);
  CHECK(config.value_text("mpi.cma") == "allgather");
  CHECK_THROWS_WITH(config.set("mpi.cma", "yes"), Catch::Contains("expected auto, on, allgather or off"));
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
  CHECK(keys.size() == 44);
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
