// Arrival patterns (per-rank start offsets in virtual time), the predictions
// schedules are planned from, and Proficz's arrival-aware allreduces (SLT,
// PRR) against the ring: proven for any predicted order, equal to the ring
// when arrival is balanced, faster once a late rank arrives -- on the
// simulator and the emulator alike.
#include <catch2/catch.hpp>
#include <numeric>

#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "plan/autotune.hpp"
#include "tests/support.hpp"
#include "tools/experiment.hpp"

using namespace copse;

namespace {

std::string write_file(const std::string& name, const std::string& text) {
  static const testing::TempDir dir;  // removed when the test program ends
  return dir.write(name, text);
}

const AlgorithmInfo& allreduce(std::string_view name) { return find_algorithm(Collective::allreduce, name); }

// The simulator's finish times for `name`, planned and tuned for the pattern
// (with predictions `predicted`, or the pattern itself).
struct Run {
  int blocks;
  std::vector<Picos> finish;
  Picos after_last_arrival;
};
Run simulated(std::string_view name, int p, std::uint64_t count, const std::vector<Picos>& offsets,
              std::vector<Picos> predicted = {}) {
  SimulationOptions o;
  o.start = offsets;
  Shape shape{p, count, 1, 0, planning_hints(o, predicted.empty() ? offsets : predicted)};
  shape.blocks = best_blocks(allreduce(name), shape, o);
  const auto r = simulate(allreduce(name).plan(shape), p, o);
  return {shape.blocks, r.finish, arrival_measures(r.finish, offsets).after_last_arrival};
}

}  // namespace

TEST_CASE("arrival patterns: one-late, rand-late and files of offsets") {
  CHECK(parse_arrival("none", 4).none());
  const auto one = parse_arrival("one-late:2ms", 4);
  CHECK(one.offsets == std::vector<Picos>{0, 2000000000, 0, 0});

  const auto a = parse_arrival("rand-late:1us:7", 200), b = parse_arrival("rand-late:1us:7", 200);
  const auto c = parse_arrival("rand-late:1us:8", 200), d = parse_arrival("rand-late:1us", 200);
  CHECK(a.offsets == b.offsets);  // reproducible
  CHECK(a.offsets != c.offsets);  // the seed matters
  CHECK(d.offsets == parse_arrival("rand-late:1us:1", 200).offsets);
  CHECK(*std::min_element(a.offsets.begin(), a.offsets.end()) >= 0);
  CHECK(*std::max_element(a.offsets.begin(), a.offsets.end()) <= 1000000);
  // Spread over the range, not bunched at one end.
  const double mean = std::accumulate(a.offsets.begin(), a.offsets.end(), 0.0) / 200;
  CHECK(mean > 400000);
  CHECK(mean < 600000);

  const auto f = parse_arrival("file:" + write_file("ok", "# rank offsets\n0\n1.5us  # late\n\n2ns\n"), 3);
  CHECK(f.offsets == std::vector<Picos>{0, 1500000, 2000});

  auto refused = [](const std::string& text, int ranks, const std::string& says) {
    INFO(text);
    CHECK_THROWS_WITH(parse_arrival(text, ranks), Catch::Contains(says));
  };
  refused("one-late", 4, "unknown pattern");
  refused("early:1ms", 4, "unknown pattern");
  refused("one-late:fast", 4, "one-late:fast");
  refused("one-late:1ms", 1, "only one rank");
  refused("rand-late:1ms:x", 4, "seed");
  const std::string bad = write_file("bad", "0\n1us\nsoon\n");
  refused("file:" + bad, 3, bad + ":3");
  const std::string extra = write_file("extra", "0\n0\n0\n0\n");
  refused("file:" + extra, 3, extra + ":4: more offsets than the 3 ranks");
  refused("file:" + write_file("short", "0\n"), 3, "1 offsets for 3 ranks");
  refused("file:/nonexistent/offsets", 3, "cannot be read");
}

TEST_CASE("arrival predictions: exact, or wrong by a reproducible relative or absolute error") {
  const std::vector<Picos> actual = {0, 1000000, 5000, 0};
  CHECK(predict_arrivals(actual, parse_arrival_error("0")) == actual);
  const auto rel = predict_arrivals(actual, parse_arrival_error("10%:3"));
  CHECK(rel == predict_arrivals(actual, parse_arrival_error("10%:3")));
  CHECK(rel != predict_arrivals(actual, parse_arrival_error("10%:4")));
  for (std::size_t r = 0; r < actual.size(); ++r) {
    CHECK(rel[r] >= static_cast<Picos>(0.9 * static_cast<double>(actual[r])));
    CHECK(rel[r] <= static_cast<Picos>(1.1 * static_cast<double>(actual[r])) + 1);
  }
  const auto abs = predict_arrivals(actual, parse_arrival_error("1us"));
  CHECK(abs != actual);
  for (std::size_t r = 0; r < actual.size(); ++r) {
    CHECK(abs[r] >= 0);
    CHECK(std::abs(abs[r] - actual[r]) <= 1000000);
  }
  CHECK_THROWS_AS(parse_arrival_error("ten%"), UsageError);
  CHECK_THROWS_AS(parse_arrival_error("-1us"), UsageError);
  CHECK_THROWS_AS(parse_arrival_error("5%:-2"), UsageError);
}

TEST_CASE("a late rank's clock starts at its offset, in the simulator") {
  // Two ranks exchanging n bytes: the exchange starts when the later arrives.
  SimulationOptions o;
  o.model = CostModel::uniform({1e-6, 1e-9}, 0, Ports::bidirectional);
  const auto& rd = allreduce("recursive-doubling");
  o.start = {0, 7000000};
  const auto r = simulate(rd.plan(Shape{2, 1000, 1, 0}), 2, o);
  CHECK(r.finish == std::vector<Picos>{7000000 + 2000000, 7000000 + 2000000});
  CHECK(arrival_measures(r.finish, o.start).after_last_arrival == 2000000);
  CHECK(arrival_measures(r.finish, o.start).mean_elapsed == (9000000 + 2000000) / 2);
  o.start = {0, -1};
  CHECK_THROWS_AS(simulate(rd.plan(Shape{2, 1000, 1, 0}), 2, o), UsageError);
  o.start = {0};
  CHECK_THROWS_AS(simulate(rd.plan(Shape{2, 1000, 1, 0}), 2, o), UsageError);
}

TEST_CASE("SLT and PRR are proven for p = 1..64 whatever the predicted arrival order", "[exhaustive]") {
  for (int p = 1; p <= 64; ++p)
    for (const std::string pattern : {"none", "one-late:3us", "rand-late:20us:5", "rand-late:1ms:9"}) {
      const auto arrival = pattern == "one-late:3us" && p < 2 ? ArrivalPattern{} : parse_arrival(pattern, p);
      for (int blocks : {1, 3, 8})
        for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t(p + 1), std::uint64_t(3 * p + 5)})
          for (auto name : {"slt", "prr"}) {
            const Shape shape{p, count, blocks, 0, planning_hints(SimulationOptions{}, arrival.offsets)};
            const auto r = verify(allreduce(name), shape);
            INFO(name << " p=" << p << " " << pattern << " blocks=" << blocks << " count=" << count << ": "
                      << r.message);
            REQUIRE(r.proven);
          }
    }
}

TEST_CASE("balanced arrival: PRR is the ring (within 5%), SLT is slower") {
  for (int p : {2, 5, 8, 16, 48})
    for (std::uint64_t count : {std::uint64_t{4096}, std::uint64_t{1} << 20}) {
      const Picos ring = simulated("ring", p, count, {}).finish[0];
      const auto prr = simulated("prr", p, count, {}), slt = simulated("slt", p, count, {});
      const Picos prr_time = *std::max_element(prr.finish.begin(), prr.finish.end());
      const Picos slt_time = *std::max_element(slt.finish.begin(), slt.finish.end());
      INFO("p=" << p << " count=" << count << ": ring " << ring << ", prr " << prr_time << " (" << prr.blocks
                << " blocks), slt " << slt_time);
      CHECK(static_cast<double>(prr_time) <= 1.05 * static_cast<double>(ring));
      if (p > 2) CHECK(slt_time > ring);
    }
}

TEST_CASE("one rank late by much more than the allreduce: SLT and PRR finish before the ring once it arrives") {
  // Vectors whose transfer time outweighs the ring's 2(p-1) latencies, as in
  // Proficz's Table 3 (1M floats over 1 Gbps Ethernet): below that every
  // algorithm is latency-bound and PRR falls back to the ring itself.
  for (int p : {4, 8, 16, 48})
    for (std::uint64_t count : {std::uint64_t{1} << 22, std::uint64_t{1} << 24}) {
      const Run ring = simulated("ring", p, count, {});
      const Picos balanced = ring.finish[0];
      const std::vector<Picos> late = parse_arrival("one-late:" + std::to_string(20 * balanced) + "ps", p).offsets;
      const Picos ring_after = simulated("ring", p, count, late).after_last_arrival;
      for (auto name : {"slt", "prr"}) {
        const Run run = simulated(name, p, count, late);
        INFO(name << " p=" << p << " count=" << count << " (" << run.blocks << " blocks): " << run.after_last_arrival
                  << " ps after the late arrival, ring " << ring_after);
        CHECK(run.after_last_arrival < ring_after);
      }
    }
}

TEST_CASE("concurrency: the emulator's virtual times equal the simulator's for every arrival pattern") {
  ClusterSpec spec;
  spec.ranks_per_node = {2, 2, 2, 2, 1};  // 9 ranks, both link levels
  spec.repetitions = 2;
  const ReduceOp sum = builtin_op("sum", DType::int32);
  for (const std::string pattern : {"none", "one-late:40us", "rand-late:30us:2"})
    for (const std::string error : {"0", "50%:3"})
      for (auto name : {"ring", "prr", "slt", "dual-root", "bi-greedy"}) {
        spec.arrival = parse_arrival(pattern, 9);
        spec.predicted_arrival =
            error == "0" ? std::vector<Picos>{}
                         : predict_arrivals(spec.arrival.none() ? std::vector<Picos>(9, 0) : spec.arrival.offsets,
                                            parse_arrival_error(error));
        const EmulatedCluster cluster(spec);
        const auto run = run_checked_emulation(cluster, allreduce(name), sum, 30000, 0, std::nullopt);
        INFO(name << " " << pattern << " error " << error << ": " << run.failure);
        REQUIRE(run.ok);
        CHECK(run.emulation.virtual_finish ==
              simulate(cluster.plan(allreduce(name), run.shape), 9, cluster.simulation(4)).finish);
      }
}

TEST_CASE("concurrency: on the emulator too, SLT and PRR beat the ring after one very late rank arrives") {
  ClusterSpec spec;
  spec.ranks_per_node = std::vector<int>(8, 1);
  const ReduceOp sum = builtin_op("sum", DType::float32);
  const std::uint64_t count = 1 << 18;  // 1 MiB
  const Picos balanced = run_checked_emulation(EmulatedCluster(spec), allreduce("ring"), sum, count, 0, std::nullopt)
                             .emulation.virtual_time;
  spec.arrival = parse_arrival("one-late:" + std::to_string(20 * balanced) + "ps", 8);
  const EmulatedCluster cluster(spec);
  auto after = [&](std::string_view name) {
    const auto run = run_checked_emulation(cluster, allreduce(name), sum, count, 0, std::nullopt);
    INFO(name << ": " << run.failure);
    REQUIRE(run.ok);
    return arrival_measures(run.emulation.virtual_finish, spec.arrival.offsets).after_last_arrival;
  };
  const Picos ring = after("ring");
  CHECK(ring == balanced);  // the ring only starts once everyone is there
  CHECK(after("slt") < ring);
  CHECK(after("prr") < ring);
}

TEST_CASE("concurrency: the Proficz study reproduces the shape of his Fig. 10 on the emulator") {
  ProficzStudyOptions o;
  o.ranks = 8;
  o.bytes = std::uint64_t{1} << 20;
  o.delays = {0, 20};
  o.sizes = {};
  o.errors = {0, 4};
  const ProficzStudy study = run_proficz_study(o);
  CHECK(study.balanced_ring > 0);
  auto row = [&](const std::string& part, const std::string& name, Picos delay, double error = 0) {
    for (const auto& r : study.rows)
      if (r.part == part && r.algorithm == name && r.delay == delay && r.error == error) return r;
    FAIL("no row " << part << " " << name << " " << delay);
    return ProficzRow{};
  };
  for (const auto& r : study.rows) {
    INFO(r.part << " " << r.algorithm << " delay " << r.delay);
    CHECK(r.ok);
  }
  // Balanced: PRR within 5% of the ring, SLT slower.
  const Picos ring = row("delay", "ring", 0).measures.after_last_arrival;
  CHECK(ring == study.balanced_ring);
  CHECK(static_cast<double>(row("delay", "prr", 0).measures.after_last_arrival) <= 1.05 * static_cast<double>(ring));
  CHECK(row("delay", "slt", 0).measures.after_last_arrival > ring);
  // One rank late by 20 ring times: both faster once it arrives, and on the mean elapsed time.
  const Picos late = 20 * study.balanced_ring;
  for (auto name : {"slt", "prr"}) {
    const ProficzRow r = row("delay", name, late);
    INFO(name);
    CHECK(r.measures.after_last_arrival < r.ring.after_last_arrival);
    CHECK(r.measures.mean_elapsed < r.ring.mean_elapsed);
    // Predictions wrong by four times the delay throw the advantage away.
    CHECK(row("error", name, 2 * study.balanced_ring, 4).measures.after_last_arrival >
          row("error", name, 2 * study.balanced_ring, 0).measures.after_last_arrival);
  }
}
