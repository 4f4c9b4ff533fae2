// The decision table (config/decision_table.hpp): parsing, first-match
// decisions, the fallback, and every mistake named with file, line and reason.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "common/error.hpp"
#include "config/decision_table.hpp"

using namespace copse;

namespace {

constexpr const char* kTable = R"(
default = "mpi"
[[row]]
collective = "bcast"
max_bytes = "128B"
use = "mpi"
note = "np 4: 0.01x"
[[row]]
collective = "bcast"
min_ranks = 2
max_ranks = 2
use = "copse"
[[row]]
collective = "*"
min_bytes = 2048
max_bytes = "512KiB"
max_nodes = 1
use = "copse"
[[row]]
collective = "allreduce"
min_nodes = 2
use = "copse"
)";

CallShape call(MpiCollective c, std::uint64_t bytes, int ranks, int nodes = 1, int hosts = 1) {
  return {c, bytes, ranks, nodes, hosts};
}

std::string error_of(const std::string& text) {
  try {
    parse_decision_table(text, "t.toml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("decision table: the first matching row decides, in file order, unmatched calls take the default") {
  const DecisionTable t = parse_decision_table(kTable, "t.toml");
  REQUIRE(t.rows.size() == 4);
  CHECK(t.fallback == Provider::mpi);
  CHECK(t.rows[0].line == 3);
  CHECK(t.rows[0].note == "np 4: 0.01x");
  // Row 1 before row 2: a small bcast goes to MPI even at 2 ranks.
  CHECK(t.find(call(MpiCollective::bcast, 8, 2)) == 0);
  CHECK(t.decide(call(MpiCollective::bcast, 8, 2)) == Provider::mpi);
  CHECK(t.find(call(MpiCollective::bcast, 129, 2)) == 1);
  CHECK(t.decide(call(MpiCollective::bcast, 129, 2)) == Provider::copse);
  // Inclusive bounds, "*" for any collective, node counts.
  CHECK(t.find(call(MpiCollective::reduce, 2048, 4)) == 2);
  CHECK(t.find(call(MpiCollective::reduce, 512 * 1024, 4)) == 2);
  CHECK(t.find(call(MpiCollective::reduce, 512 * 1024 + 1, 4)) == 4);
  CHECK(t.find(call(MpiCollective::reduce, 4096, 4, 2)) == 4);
  CHECK(t.decide(call(MpiCollective::reduce, 4096, 4, 2)) == Provider::mpi);
  CHECK(t.decide(call(MpiCollective::allreduce, 8, 64, 3)) == Provider::copse);
  // A table for shapes the job does not have decides nothing: the default.
  CHECK(t.decide(call(MpiCollective::barrier, 0, 5, 1)) == Provider::mpi);
  // What a communicator keeps: the rows its shape can match, then bytes only.
  for (const auto& [c, ranks, nodes] : std::vector<std::tuple<MpiCollective, int, int>>{
           {MpiCollective::bcast, 2, 1}, {MpiCollective::bcast, 4, 1}, {MpiCollective::allreduce, 8, 2}})
    for (std::uint64_t bytes : {0, 8, 128, 129, 2048, 4096, 1 << 20})
      CHECK(t.find(t.rows_for(c, CallForm::blocking, ranks, nodes, 1), bytes) == t.find(call(c, bytes, ranks, nodes)));
  CHECK(t.rows_for(MpiCollective::bcast, CallForm::blocking, 4, 1, 1) == std::vector<std::uint32_t>{0, 2});
  const std::string text = t.describe();
  CHECK_THAT(text, Catch::Contains("row 1 (line 3): bcast bytes <= 128 B -> mpi  # np 4: 0.01x"));
  CHECK_THAT(text, Catch::Contains("row 3 (line 13): every collective bytes 2 KiB..512 KiB nodes <= 1 -> copse"));
  CHECK_THAT(text, Catch::Contains("no row matches -> mpi"));
}

TEST_CASE("decision table: the writer's text reads back as the same table, and describe shows a run's counts") {
  DecisionTable t = parse_decision_table(kTable, "t.toml");
  t.fallback = Provider::copse;
  t.rows[1].shape = "np2";
  t.rows[1].note = "a \"quoted\" note \\ with a backslash";
  t.rows[2].min_bytes = 1000;                    // not whole KiB: an integer
  t.rows[2].max_bytes = std::uint64_t{3} << 20;  // whole MiB
  t.rows[3].min_ranks = 2;
  t.rows[3].max_nodes = 9;
  t.rows[3].min_hosts = 2;
  t.rows[0].max_hosts = 1;
  t.rows[2].hierarchy = Form::multi_leader;  // rows 1-3 use copse
  t.rows[3].blocks = 16;
  const std::string text = write_decision_table(t, "made here\nsecond line");
  CHECK(text.starts_with("# made here\n# second line\ndefault = \"copse\"\n"));
  CHECK_THAT(text, Catch::Contains("max_bytes = \"3MiB\"\n") && Catch::Contains("min_bytes = 1000\n") &&
                       Catch::Contains("max_bytes = 128\n") && Catch::Contains("shape = \"np2\"\n") &&
                       Catch::Contains("use = \"copse\"\nhierarchy = \"multi-leader\"\n") &&
                       Catch::Contains("blocks = 16\n"));
  DecisionTable back = parse_decision_table(text, "w.toml");
  CHECK(back.fallback == Provider::copse);
  REQUIRE(back.rows.size() == t.rows.size());
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    back.rows[i].line = t.rows[i].line;
    CHECK(back.rows[i] == t.rows[i]);
  }
  CHECK(back.rows[1].shape == "np2");
  // A stats file's counts: per row, then the unmatched calls.
  const std::string counted = t.describe({7, 1, 0, 2, 5});
  CHECK_THAT(counted, Catch::Contains("row 1 (line 3), 7 calls: bcast bytes <= 128 B hosts <= 1 -> mpi"));
  CHECK_THAT(counted, Catch::Contains("row 2 (line 8), 1 call: bcast"));
  CHECK_THAT(counted, Catch::Contains("no row matches, 5 calls -> copse"));
  CHECK_THAT(counted, Catch::Contains("-> copse (multi-leader)") && Catch::Contains("-> copse (16 blocks)"));
}

TEST_CASE("decision table: virtual nodes of one host and real hosts are told apart") {
  const DecisionTable t = parse_decision_table(R"(
[[row]]
collective = "bcast"
min_nodes = 2
max_hosts = 1
use = "mpi"
note = "np4-vn2"
[[row]]
collective = "bcast"
min_hosts = 2
use = "copse"
)",
                                               "h.toml");
  CHECK(t.find(call(MpiCollective::bcast, 8, 4, 2, 1)) == 0);  // two virtual nodes on one host
  CHECK(t.find(call(MpiCollective::bcast, 8, 4, 2, 2)) == 1);  // two hosts
  CHECK(t.find(call(MpiCollective::bcast, 8, 8, 4, 2)) == 1);  // two hosts of two virtual nodes
  CHECK(t.find(call(MpiCollective::bcast, 8, 4, 1, 1)) == 2);  // one node: no row
  CHECK(t.rows_for(MpiCollective::bcast, CallForm::blocking, 4, 2, 1) == std::vector<std::uint32_t>{0});
  CHECK(t.rows_for(MpiCollective::bcast, CallForm::blocking, 4, 2, 3) == std::vector<std::uint32_t>{1});
  CHECK_THAT(t.describe(), Catch::Contains("row 1 (line 2): bcast nodes >= 2 hosts <= 1 -> mpi") &&
                               Catch::Contains("row 2 (line 8): bcast hosts >= 2 -> copse"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmin_hosts = 3\nmax_hosts = 2"),
             Catch::Contains("line 1: min_hosts is above max_hosts"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmax_hosts = 0"),
             Catch::Contains("line 3: max_hosts must be a whole number >= 1"));
}

TEST_CASE("decision table: a row's form decides only calls of that form, a row without one every form") {
  const DecisionTable t = parse_decision_table(R"(
[[row]]
collective = "allreduce"
form = "blocking"
max_bytes = 256
use = "mpi"
note = "np2: tuned/copse 0.75"
[[row]]
collective = "allreduce"
form = "persistent"
use = "copse"
[[row]]
collective = "allreduce"
max_bytes = 256
use = "mpi"
)",
                                               "f.toml");
  REQUIRE(t.rows.size() == 3);
  CHECK(t.rows[0].form == CallForm::blocking);
  CHECK(t.rows[1].form == CallForm::persistent);
  CHECK_FALSE(t.rows[2].form);
  const auto in = [](CallForm form) { return CallShape{MpiCollective::allreduce, 8, 2, 1, 1, form}; };
  CHECK(t.find(in(CallForm::blocking)) == 0);
  CHECK(t.find(in(CallForm::persistent)) == 1);
  CHECK(t.decide(in(CallForm::persistent)) == Provider::copse);
  CHECK(t.find(in(CallForm::nonblocking)) == 2);  // no nonblocking row: the row for every form
  CHECK(t.decide(in(CallForm::nonblocking)) == Provider::mpi);
  // What a communicator keeps, per form.
  CHECK(t.rows_for(MpiCollective::allreduce, CallForm::blocking, 2, 1, 1) == std::vector<std::uint32_t>{0, 2});
  CHECK(t.rows_for(MpiCollective::allreduce, CallForm::persistent, 2, 1, 1) == std::vector<std::uint32_t>{1, 2});
  CHECK(t.rows_for(MpiCollective::allreduce, CallForm::nonblocking, 2, 1, 1) == std::vector<std::uint32_t>{2});
  CHECK(t.find(t.rows_for(MpiCollective::allreduce, CallForm::persistent, 2, 1, 1), 8) == 1);
  // Shown and written with the form, read back the same.
  CHECK_THAT(t.describe(), Catch::Contains("row 1 (line 2): allreduce blocking bytes <= 256 B -> mpi") &&
                               Catch::Contains("row 2 (line 8): allreduce persistent -> copse") &&
                               Catch::Contains("row 3 (line 12): allreduce bytes <= 256 B -> mpi"));
  const std::string text = write_decision_table(t, "forms");
  CHECK_THAT(text, Catch::Contains("form = \"persistent\"\n"));
  const DecisionTable back = parse_decision_table(text, "w.toml");
  REQUIRE(back.rows.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(back.rows[i].form == t.rows[i].form);
  // A form that is not one: file, line, reason.
  CHECK(error_of("[[row]]\nuse = \"mpi\"\nform = \"immediate\"") ==
        "decision table t.toml, line 3: form must be \"blocking\", \"nonblocking\" or \"persistent\" (absent: every "
        "form)");
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nform = 2"), Catch::Contains("line 3: form must be"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nform = \"*\""), Catch::Contains("line 3: form must be"));
  CHECK(call_form_named("nonblocking") == CallForm::nonblocking);
  CHECK_FALSE(call_form_named("Blocking"));
}

TEST_CASE("decision table: the default default is mpi, and an empty table defers everything") {
  const DecisionTable t = parse_decision_table("", "empty.toml");
  CHECK(t.rows.empty());
  CHECK(t.decide(call(MpiCollective::allreduce, 8, 2)) == Provider::mpi);
}

TEST_CASE("decision table: mistakes name the file, the line and the reason") {
  CHECK(error_of("default = \"fast\"") == "decision table t.toml, line 1: default must be \"copse\" or \"mpi\"");
  CHECK(error_of("[[row]]\ncollective = \"alltoallw\"\nuse = \"mpi\"") ==
        "decision table t.toml, line 2: collective must be one of allreduce, reduce, bcast, barrier, allgather, "
        "reduce_scatter_block, reduce_scatter, scatter, gather, alltoall, allgatherv, gatherv, scatterv, "
        "alltoallv, or \"*\"");
  CHECK_THAT(error_of("[[row]]\ncollective = \"bcast\""), Catch::Contains("line 1: a row needs use ="));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmax_byte = 3"), Catch::Contains("line 3: unknown key 'max_byte'"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmin_bytes = \"2KiB\"\nmax_bytes = 1024"),
             Catch::Contains("line 1: min_bytes is above max_bytes"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmin_ranks = 0"),
             Catch::Contains("line 3: min_ranks must be a whole number >= 1"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmax_bytes = \"lots\""), Catch::Contains("line 3: max_bytes: "));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nmin_bytes = -1"), Catch::Contains("line 3: min_bytes must not be"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nshape = 4"), Catch::Contains("line 3: shape must be a string"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nhierarchy = \"lanes\""),
             Catch::Contains("line 3: hierarchy is the form copse plans in: only with use = \"copse\""));
  CHECK_THAT(error_of("[[row]]\nuse = \"copse\"\nhierarchy = \"tree\""),
             Catch::Contains("line 3: hierarchy: unknown hierarchy form \"tree\" (expected flat, leader"));
  CHECK_THAT(error_of("[[row]]\nuse = \"copse\"\nhierarchy = 2"),
             Catch::Contains("line 3: hierarchy must be a string"));
  CHECK_THAT(error_of("[[row]]\nuse = \"mpi\"\nblocks = 4"),
             Catch::Contains("line 3: blocks is the block count copse plans with: only with use = \"copse\""));
  CHECK_THAT(error_of("[[row]]\nuse = \"copse\"\nblocks = 0"),
             Catch::Contains("line 3: blocks must be a whole number >= 1"));
  CHECK_THAT(error_of("[[row]]\nuse = \"copse\"\nblocks = \"many\""),
             Catch::Contains("line 3: blocks must be a whole number >= 1"));
  CHECK_THAT(error_of("rows = 3"), Catch::Contains("line 1: unknown key 'rows'"));
  CHECK_THAT(error_of("row = 3"), Catch::Contains("row must be an array of tables"));
  CHECK_THAT(error_of("[[row]\nuse = 1"), Catch::StartsWith("decision table t.toml, line 1: "));
}

TEST_CASE("decision table: mpi.table picks the built-in table, none, or a file") {
  MpiOptions o;
  REQUIRE(configured_decision_table(o));
  CHECK(configured_decision_table(o)->source == "built-in");
  CHECK(configured_decision_table(o)->rows == builtin_decision_table().rows);
  // The shipped table is measured (copse tune) at np 2, 4 and 8 on one node,
  // np 4 on two virtual nodes and np 4 on two hosts, and has one row by hand
  // for each v-variant: every served collective has a row of its own at each
  // of those shapes, at the smallest and the largest size measured.
  for (MpiCollective c : kMpiCollectives)
    for (const CallShape& shape :
         {call(c, 8, 2), call(c, 16 << 20, 2), call(c, 8, 4), call(c, 16 << 20, 4), call(c, 8, 8), call(c, 16 << 20, 8),
          call(c, 8, 4, 2), call(c, 16 << 20, 4, 2), call(c, 8, 4, 2, 2), call(c, 16 << 20, 4, 2, 2)}) {
      const std::size_t row = builtin_decision_table().find(shape);
      REQUIRE(row < builtin_decision_table().rows.size());
      CHECK(builtin_decision_table().rows[row].collective == c);
    }
  o.table = "none";
  CHECK_FALSE(configured_decision_table(o));
  const std::string path = "copse-test-decisions.toml";
  { std::ofstream(path) << "default = \"copse\"\n[[row]]\ncollective = \"barrier\"\nuse = \"mpi\"\n"; }
  o.table = path;
  const auto t = configured_decision_table(o);
  std::remove(path.c_str());
  REQUIRE(t);
  CHECK(t->source == path);
  CHECK(t->decide(call(MpiCollective::barrier, 0, 4)) == Provider::mpi);
  CHECK(t->decide(call(MpiCollective::allreduce, 0, 4)) == Provider::copse);
  o.table = "/nonexistent/decisions.toml";
  CHECK_THROWS_WITH(configured_decision_table(o),
                    Catch::StartsWith("cannot read decision table /nonexistent/decisions.toml: "));
}
