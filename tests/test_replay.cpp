// copse replay (tools/replay.hpp): a hand-written trace read and replayed on a
// cluster of another shape, each call's time checked against the simulator
// run by hand with the arrivals the replay rules give; and the trace
// reader's errors, each naming file and line.

#include <catch2/catch.hpp>
#include <string>

#include "algorithms/registry.hpp"
#include "common/units.hpp"
#include "plan/autotune.hpp"
#include "tests/support.hpp"
#include "tools/replay.hpp"

using namespace copse;

namespace {

std::string write_trace(const std::string& name, const std::string& text) {
  static const testing::TempDir dir;  // removed when the test program ends
  return dir.write(name + ".jsonl", text);
}

std::string line(int rank, int call, const std::string& collective, int comm_size, int count, int type_size, int root,
                 double gap, const std::string& site = "app+0x10") {
  return "{\"rank\": " + std::to_string(rank) + ", \"size\": 2, \"call\": " + std::to_string(call) +
         ", \"collective\": \"" + collective + "\", \"comm_size\": " + std::to_string(comm_size) +
         ", \"comm_rank\": 0, \"count\": " + std::to_string(count) + ", \"type_size\": " + std::to_string(type_size) +
         ", \"op\": \"sum\", \"root\": " + std::to_string(root) + ", \"served\": true, \"site\": \"" + site +
         "\", \"t\": 0, \"gap\": " + std::to_string(gap) + ", \"duration\": 0.001}\n";
}

// Two processes: an allreduce of 4096 floats after 1 ms (rank 0) and 3 ms
// (rank 1) of computation, then a bcast of 1000 bytes from rank 1 straight
// after, then an allreduce of 64 ints on communicators of one process.
const std::string kTrace =
    line(1, 0, "allreduce", 2, 4096, 4, -1, 0.003, "app+0x10") +
    line(0, 0, "allreduce", 2, 4096, 4, -1, 0.001, "app+0x10") + line(0, 1, "bcast", 2, 250, 4, 1, 0, "app+0x20") +
    line(1, 1, "bcast", 2, 250, 4, 1, 0, "app+0x20") + line(0, 2, "allreduce", 1, 64, 4, -1, 0.0005, "app+0x30") +
    line(1, 2, "allreduce", 1, 64, 4, -1, 0.0005, "app+0x30");

ClusterSpec two_by_two() {
  ClusterSpec spec;
  spec.ranks_per_node = {2, 2};
  return spec;
}

// finish[] of `algorithm` on the flat 2 x 2 cluster for `shape` from `start`.
std::vector<Picos> simulated(Collective c, const std::string& name, Shape shape, std::uint64_t element_bytes,
                             const std::vector<Picos>& start, std::optional<int> blocks) {
  const EmulatedCluster cluster(two_by_two());
  const AlgorithmInfo& alg = find_algorithm(c, name);
  SimulationOptions sim = cluster.simulation(element_bytes);
  shape.hints = cluster.hints(element_bytes);
  shape.blocks = resolve_blocks([&](const Shape& s) { return alg.plan(s); }, alg, shape, blocks, sim);
  sim.start = start;
  return simulate(alg.plan(shape), shape.ranks, sim).finish;
}

}  // namespace

TEST_CASE("replay: a hand-written trace on 2 x 2 ranks, each call as the simulator times it") {
  const std::string path = write_trace("good", kTrace);
  const Trace trace = read_trace(path);
  REQUIRE(trace.processes == 2);
  REQUIRE(trace.sequence_length() == 3);
  CHECK(trace.calls[1][0].gap == Approx(0.003));
  CHECK(trace.calls[0][1].root == 1);

  for (const std::string algorithm : {"ring", "dual-root"}) {
    CAPTURE(algorithm);
    ReplayOptions o;
    o.cluster = two_by_two();
    o.algorithms[Collective::allreduce] = algorithm;
    o.algorithms[Collective::bcast] = "binomial";
    const ReplayResult r = replay(trace, o);
    REQUIRE(r.ranks == 4);
    REQUIRE(r.calls == 3);
    REQUIRE(r.sites.size() == 3);

    // Call 0: ranks 0 and 2 play process 0 (1 ms), ranks 1 and 3 process 1 (3 ms).
    const Picos ms = to_picos(1e-3);
    std::vector<Picos> arrival = {ms, 3 * ms, ms, 3 * ms};
    std::vector<Picos> offsets = {0, 2 * ms, 0, 2 * ms};
    const auto f0 = simulated(Collective::allreduce, algorithm, Shape{4, 4096, 1, 0, nullptr}, 4, offsets, {});
    Picos elapsed = 0, last = 0;
    std::vector<Picos> clock(4);
    for (std::size_t k = 0; k < 4; ++k) clock[k] = ms + f0[k], elapsed += clock[k] - arrival[k];
    for (Picos c : clock) last = std::max(last, c);
    CHECK(r.sites[0].collective == "allreduce");
    CHECK(r.sites[0].algorithm == algorithm);
    CHECK(r.sites[0].group == 4);
    CHECK(r.sites[0].time == elapsed / 4);
    CHECK(r.sites[0].after_last == last - 3 * ms);
    CHECK(r.sites[0].traced == Approx(0.001));

    // Call 1: no computation, so each rank arrives when its allreduce ended;
    // 1000 bytes from rank 1.
    const Picos first = *std::min_element(clock.begin(), clock.end());
    std::vector<Picos> start(4);
    for (std::size_t k = 0; k < 4; ++k) start[k] = clock[k] - first;
    const auto f1 = simulated(Collective::bcast, "binomial", Shape{4, 1000, 1, 1, nullptr}, 1, start, {});
    Picos bcast = 0;
    for (std::size_t k = 0; k < 4; ++k) bcast += first + f1[k] - clock[k], clock[k] = first + f1[k];
    CHECK(r.sites[1].collective == "bcast");
    CHECK(r.sites[1].bytes == 1000);
    CHECK(r.sites[1].time == bcast / 4);

    // Call 2: communicators of 1 of 2 processes become groups of 2 of 4 ranks,
    // the first group on node 0, the second on node 1.
    CHECK(r.sites[2].group == 2);
    CHECK(r.sites[2].comm_size == 1);
    CHECK(r.sites[2].time > 0);
    CHECK(r.time == r.sites[0].time + r.sites[1].time + r.sites[2].time);
    CHECK(r.compute == (2 * ms + 2 * ms / 4));  // mean of 1 and 3 ms, plus 0.5 ms
    CHECK(r.end > *std::max_element(clock.begin(), clock.end()) + ms / 2);
  }
}

TEST_CASE("replay: the compute scale, fixed blocks, and ranks beyond the traced processes") {
  const Trace trace = read_trace(write_trace("scale", kTrace));
  ReplayOptions o;
  o.cluster.ranks_per_node = {4, 4, 4};  // 12 ranks play 2 processes cyclically
  o.algorithms[Collective::allreduce] = "dual-root";
  o.compute_scale = 0;
  o.blocks = 4;
  const ReplayResult r = replay(trace, o);
  CHECK(r.ranks == 12);
  CHECK(r.compute == 0);
  CHECK(r.sites[0].blocks == 4);
  CHECK(r.sites[2].group == 6);
  // Everyone on time: the first call is the balanced allreduce.
  const EmulatedCluster cluster([] {
    ClusterSpec s;
    s.ranks_per_node = {4, 4, 4};
    return s;
  }());
  const AlgorithmInfo& alg = find_algorithm(Collective::allreduce, "dual-root");
  const auto sim = simulate(alg.plan(Shape{12, 4096, 4, 0, nullptr}), 12, cluster.simulation(4));
  Picos sum = 0;
  for (Picos f : sim.finish) sum += f;
  CHECK(r.sites[0].time == sum / 12);
  CHECK(r.sites[0].after_last == sim.time);
}

TEST_CASE("replay: a bad trace is one error naming file and line") {
  const auto error_of = [](const std::string& name, const std::string& text) {
    const std::string path = write_trace(name, text);
    try {
      read_trace(path);
    } catch (const UsageError& e) {
      return std::string(e.what()).substr(path.size());
    }
    return std::string("no error");
  };
  const std::string ok0 = line(0, 0, "allreduce", 2, 8, 4, -1, 0);
  const std::string ok1 = line(1, 0, "allreduce", 2, 8, 4, -1, 0);
  CHECK_THAT(error_of("json", ok0 + "{\"rank\": 1,\n"), Catch::StartsWith(":2: not a JSON object"));
  CHECK_THAT(error_of("key", ok0 + "{\"rank\": 1, \"size\": 2}\n"), Catch::StartsWith(":2: no \"call\""));
  CHECK_THAT(error_of("collective", ok0 + line(1, 0, "alltoallw", 2, 8, 4, -1, 0)),
             Catch::StartsWith(":2: unknown collective \"alltoallw\""));
  CHECK_THAT(error_of("gap", ok0 + line(1, 0, "allreduce", 2, 8, 4, -1, -1)),
             Catch::StartsWith(":2: \"gap\" must be a number of seconds >= 0"));
  CHECK_THAT(error_of("rank", ok0 + line(2, 0, "allreduce", 2, 8, 4, -1, 0)),
             Catch::StartsWith(":2: rank 2 is not below size 2"));
  CHECK_THAT(error_of("twice", ok0 + ok1 + ok0), Catch::StartsWith(":3: rank 0's call 0 again (first at line 1)"));
  CHECK_THAT(error_of("root", ok0 + line(1, 0, "bcast", 2, 8, 4, 5, 0)),
             Catch::StartsWith(":2: bcast needs a root in [0, comm_size)"));
  CHECK_THAT(error_of("differ", ok0 + line(1, 0, "allreduce", 2, 16, 4, -1, 0)),
             Catch::StartsWith(":2: call 0 is allreduce of 64 bytes on 2 processes, but rank 0's (line 1)"));
  CHECK_THAT(error_of("missing-rank", ok0), Catch::StartsWith(": no calls of rank 1"));
  CHECK_THAT(error_of("missing-call", ok0 + ok1 + line(0, 2, "allreduce", 2, 8, 4, -1, 0)),
             Catch::StartsWith(": rank 0's call 1 is missing"));
  CHECK_THAT(error_of("empty", "\n"), Catch::StartsWith(": no calls in the trace"));
  CHECK_THROWS_WITH(read_trace("/nonexistent/trace.jsonl"), "/nonexistent/trace.jsonl: cannot be read");
}
