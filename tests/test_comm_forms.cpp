// Every form (plan/planner.hpp) through the thread Comm: 4 nodes x 4
// threads, 2 x 3 and 3 x 2, all six collectives against the sequential
// reference, with a non-commutative operator (the algorithms chosen by
// "auto" then never need commutativity), and every rank's float allreduce
// bitwise identical to rank 0's. A form that cannot take a collective (lanes
// beyond allreduce, until plan_lanes decomposes it) must refuse it with a
// UsageError on every rank, never hang or compute wrongly.

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/comm.hpp"
#include "tests/forms_check.hpp"

using namespace copse;

namespace {

struct RankLog {
  std::vector<std::string> wrong;
  testing::FormBytes allreduce;  // this rank's allreduce result (float sum), for the bitwise comparison
};

// Runs `body` on one thread per rank; a UsageError is recorded as "refused: ...".
template <class Body>
void every_rank(Team& team, std::vector<RankLog>& logs, Body body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < team.size(); ++r)
    threads.emplace_back([&, r] {
      RankLog& log = logs[static_cast<std::size_t>(r)];
      try {
        body(team.comm(r), log);
      } catch (const UsageError& e) {
        log.wrong.push_back(std::string("refused: ") + e.what());
      } catch (const std::exception& e) {
        log.wrong.push_back(std::string("failed: ") + e.what());
      }
    });
  for (auto& t : threads) t.join();
}

TeamOptions form_options(const std::vector<int>& nodes, Form form) {
  TeamOptions o;
  for (int k : nodes) o.nodes.push_back(NodeSpec{Machine::synthetic("core:4 pu:1"), k, {}});
  o.grouping = Grouping::parse("size:2");
  o.form = form;
  o.allreduce = o.reduce = o.bcast = o.barrier = o.allgather = o.reduce_scatter = "auto";
  o.wait_timeout = std::chrono::milliseconds(30000);
  return o;
}

// Each rank's virtual time after each of `calls` (of `n` floats, checked
// against the reference), `prepare(comm)` run first on every rank.
template <class Prepare>
std::vector<Picos> virtual_times(Team& team, const std::vector<Collective>& calls, std::uint64_t n, Prepare prepare) {
  const ReduceOp sum = builtin_op("sum", DType::float32);
  const auto ranks = static_cast<std::size_t>(team.size());
  std::vector<Picos> out(calls.size() * ranks);
  std::vector<RankLog> logs(ranks);
  every_rank(team, logs, [&](Comm& comm, RankLog& log) {
    prepare(comm);
    const std::size_t at = static_cast<std::size_t>(comm.rank()) * calls.size();
    for (std::size_t i = 0; i < calls.size(); ++i) {
      if (!testing::check_collective(comm, calls[i], sum, n, log.allreduce))
        log.wrong.emplace_back(to_string(calls[i]));
      out[at + i] = comm.virtual_time();
    }
  });
  for (std::size_t r = 0; r < logs.size(); ++r)
    for (const std::string& w : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << w);
  return out;
}

}  // namespace

TEST_CASE("concurrency: comm forms: every form, every collective, 4x4, 2x3 and 3x2, against the reference",
          "[comm][planner]") {
  const std::vector<ReduceOp> ops{builtin_op("sum", DType::float32), builtin_op("affine", DType::uint32)};
  for (const std::vector<int>& nodes : std::vector<std::vector<int>>{{4, 4, 4, 4}, {3, 3}, {2, 2, 2}})
    for (Form form : {Form::flat, Form::leader, Form::multi_leader, Form::lanes, Form::automatic}) {
      Team team(form_options(nodes, form));
      for (Collective c : all_collectives())
        for (const ReduceOp& op : ops)
          for (std::uint64_t n : {std::uint64_t{3}, std::uint64_t{1000}}) {
            std::vector<RankLog> logs(static_cast<std::size_t>(team.size()));
            every_rank(team, logs, [&](Comm& comm, RankLog& log) {
              if (!testing::check_collective(comm, c, op, n, log.allreduce)) log.wrong.push_back("wrong result");
            });
            INFO(to_string(form) << " on " << nodes.size() << " nodes of " << nodes[0] << ": " << to_string(c) << " "
                                 << op.name << " n=" << n);
            const bool refused = !logs[0].wrong.empty() && logs[0].wrong[0].rfind("refused", 0) == 0;
            if (refused) {
              // Only lanes may refuse, and only beyond allreduce; then every rank does.
              INFO(logs[0].wrong[0]);
              CHECK((form == Form::lanes && c != Collective::allreduce));
              for (const RankLog& log : logs) CHECK((!log.wrong.empty() && log.wrong[0].rfind("refused", 0) == 0));
              continue;
            }
            for (std::size_t r = 0; r < logs.size(); ++r)
              for (const std::string& w : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << w);
            if (c == Collective::allreduce)
              for (const RankLog& log : logs) CHECK(log.allreduce == logs[0].allreduce);  // bitwise
          }
    }
}

// Comm::set_form: the form the interposer's decision-table rows name. A call
// in a set form plans as a team configured with that form (the same virtual
// time, on a virtual clock), and a form that cannot plan a call -- lanes on
// nodes of unequal size, or beyond what the configured algorithms take --
// gives way to the configured one: every collective is still served, right.
TEST_CASE("concurrency: comm forms: a form set for the calls plans as that form configured, or keeps the configured",
          "[comm][planner]") {
  const ReduceOp sum = builtin_op("sum", DType::float32);
  // Each rank's virtual time after a bcast and after an allreduce.
  auto times = [](Team& team, std::optional<Form> set) {
    return virtual_times(team, {Collective::bcast, Collective::allreduce}, 1000,
                         [&](Comm& comm) { comm.set_form(set); });
  };
  auto clocked = [](Form form) {
    TeamOptions o = form_options({2, 2, 2}, form);
    o.bcast = "binary-tree";  // the runtime's default, as the interposer runs it
    o.allreduce = "dual-root";
    o.virtual_clock = true;
    return o;
  };
  for (Form form : {Form::lanes, Form::flat, Form::automatic}) {
    INFO(to_string(form));
    Team leader(clocked(Form::leader)), configured(clocked(form));
    const std::vector<Picos> as_leader = times(leader, std::nullopt);
    const std::vector<Picos> set = times(leader, form);
    CHECK(set == times(configured, std::nullopt));
    if (form == Form::lanes) CHECK(set != as_leader);  // the check can tell the forms apart
  }

  // Unequal nodes: lanes cannot plan; every collective still runs, right.
  Team unequal(form_options({3, 2}, Form::leader));
  for (Collective c : all_collectives()) {
    std::vector<RankLog> logs(static_cast<std::size_t>(unequal.size()));
    every_rank(unequal, logs, [&](Comm& comm, RankLog& log) {
      comm.set_form(Form::lanes);
      if (!testing::check_collective(comm, c, sum, 37, log.allreduce)) log.wrong.push_back("wrong result");
    });
    INFO(to_string(c));
    for (std::size_t r = 0; r < logs.size(); ++r)
      for (const std::string& w : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << w);
  }
}

// Comm::set_blocks: the block count a decision-table row names. A call with
// a count set plans as a team configured with that count (the same virtual
// time), 0 returns to the configured choice, and a negative count is refused.
TEST_CASE("concurrency: comm forms: a block count set for the calls plans as that count configured",
          "[comm][planner]") {
  const ReduceOp sum = builtin_op("sum", DType::float32);
  // Each rank's virtual time after a reduce and after an allgather, the count set first.
  auto times = [](Team& team, int set) {
    return virtual_times(team, {Collective::reduce, Collective::allgather}, 4096,
                         [&](Comm& comm) { comm.set_blocks(set); });
  };
  auto clocked = [](int blocks) {
    TeamOptions o = form_options({2, 2}, Form::leader);
    o.reduce = o.allgather = "binary-tree";  // the runtime's defaults across nodes
    o.blocks = blocks;
    o.virtual_clock = true;
    return o;
  };
  Team chosen(clocked(0)), four(clocked(4)), sixteen(clocked(16));
  const std::vector<Picos> as_chosen = times(chosen, 0);
  CHECK(times(chosen, 4) == times(four, 0));
  CHECK(times(chosen, 16) == times(sixteen, 0));
  CHECK(times(chosen, 4) != times(chosen, 16));  // the check can tell the counts apart
  CHECK(times(chosen, 0) == as_chosen);          // 0: the configured choice again
  CHECK(times(four, 0) == times(chosen, 4));
  CHECK_THROWS_AS(chosen.comm(0).set_blocks(-1), UsageError);

  // More blocks than a vector holds: every collective still right.
  for (Collective c : all_collectives()) {
    std::vector<RankLog> logs(static_cast<std::size_t>(chosen.size()));
    every_rank(chosen, logs, [&](Comm& comm, RankLog& log) {
      comm.set_blocks(64);
      if (!testing::check_collective(comm, c, sum, 3, log.allreduce)) log.wrong.push_back("wrong result");
    });
    INFO(to_string(c));
    for (std::size_t r = 0; r < logs.size(); ++r)
      for (const std::string& w : logs[r].wrong) FAIL_CHECK("rank " << r << ": " << w);
  }
}
