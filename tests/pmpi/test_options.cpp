// make_comm_options: every setting an MPI Team takes comes from the
// configuration, and the configuration's defaults are the Team's own (the
// MPI Team and the thread Team share team_defaults; this checks that nothing
// drifts). Needs MPI's headers, not mpirun.

#include <catch2/catch.hpp>
#include <chrono>

#include "config/config.hpp"
#include "mpi/options.hpp"

namespace {

void same_model(const copse::CostModel& a, const copse::CostModel& b) {
  REQUIRE(a.levels() == b.levels());
  for (int level = 0; level < a.levels(); ++level) {
    CHECK(a.level(level).alpha == b.level(level).alpha);
    CHECK(a.level(level).beta == b.level(level).beta);
  }
  CHECK(a.gamma() == b.gamma());
  CHECK(a.ports() == b.ports());
}

}  // namespace

TEST_CASE("mpi: make_comm_options of the default configuration is CommOptions()", "[mpi]") {
  const copse::mpi::CommOptions made = copse::mpi::make_comm_options(copse::Options{});
  const copse::mpi::CommOptions reference;
  CHECK(made.allreduce == reference.allreduce);
  CHECK(made.reduce == reference.reduce);
  CHECK(made.bcast == reference.bcast);
  CHECK(made.barrier == reference.barrier);
  CHECK(made.allgather == reference.allgather);
  CHECK(made.reduce_scatter == reference.reduce_scatter);
  CHECK(made.blocks == reference.blocks);
  same_model(made.model, reference.model);
  CHECK(made.grouping.to_string() == reference.grouping.to_string());
  CHECK(made.grouping.max_group == reference.grouping.max_group);
  CHECK(made.multi_leader == reference.multi_leader);
  CHECK(made.ranks_per_node == reference.ranks_per_node);
  CHECK(made.wait_timeout == reference.wait_timeout);
  CHECK(made.wait_report == reference.wait_report);
  CHECK(made.cross_memory_attach == reference.cross_memory_attach);
}

TEST_CASE("mpi: make_comm_options carries every setting", "[mpi]") {
  copse::Config config;
  config.set("collectives.allreduce", "ring");
  config.set("collectives.reduce", "chain");
  config.set("collectives.bcast", "binomial");
  config.set("collectives.barrier", "recursive-doubling");
  config.set("collectives.allgather", "binomial");
  config.set("collectives.reduce_scatter", "binomial");
  config.set("collectives.blocks", "7");
  config.set("model.inter_alpha", "3us");
  config.set("model.gamma", "1ps");
  config.set("hierarchy.grouping", "size:2");
  config.set("hierarchy.max_group", "3");
  config.set("hierarchy.multi_leader", "true");
  config.set("hierarchy.ranks_per_node", "3");
  config.set("runtime.wait_timeout", "2s");
  config.set("runtime.wait_report", "5s");
  config.set("mpi.cma", "on");
  const copse::mpi::CommOptions made = copse::mpi::make_comm_options(config.options());
  CHECK(made.allreduce == "ring");
  CHECK(made.reduce == "chain");
  CHECK(made.bcast == "binomial");
  CHECK(made.barrier == "recursive-doubling");
  CHECK(made.allgather == "binomial");
  CHECK(made.reduce_scatter == "binomial");
  CHECK(made.blocks == 7);
  same_model(made.model, config.cost_model());
  CHECK(made.model.level(1).alpha == 3e-6);
  CHECK(made.grouping.to_string() == "size:2");
  CHECK(made.grouping.max_group == 3);
  CHECK(made.multi_leader);
  CHECK(made.ranks_per_node == 3);
  CHECK(made.wait_timeout == std::chrono::milliseconds(2000));
  CHECK(made.wait_report == std::chrono::milliseconds(5000));
  CHECK(made.cross_memory_attach == copse::mpi::CommOptions::Attach::on);
}
