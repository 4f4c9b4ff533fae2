// Emulator benchmark: the two configurations side by side in one run.
// For each it prints the planning time, the whole emulate() call, and the
// per-repetition wall time of the slowest rank (min / median), plus the
// rank count and the bytes each rank moves, so where the time goes shows.
// Usage: bench_emulator [repetitions=5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>

#include "algorithms/simulator.hpp"
#include "emulator/emulator.hpp"

namespace {

using namespace copse;

struct Case {
  const char* label;
  int nodes, ranks_per_node;
  std::uint64_t bytes;
  int blocks;
  double target_seconds;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int repetitions = argc > 1 ? std::atoi(argv[1]) : 5;
  const auto& algorithm = find_algorithm(Collective::allreduce, "dual-root");
  const Case cases[] = {
      {"32 nodes x 8 ranks, 1 MiB per rank", 32, 8, 1u << 20, 24, 1.0},
      {"256 nodes x 16 ranks, 64 KiB per rank", 256, 16, 64u << 10, 8, 10.0},
  };
  std::printf("dual-root allreduce, int32 sum, %d repetitions each (mpicroscope: slowest rank per repetition)\n",
              repetitions);
  for (const Case& c : cases) {
    EmulatorConfig config;
    config.layout = RankMap::uniform(c.nodes * c.ranks_per_node, c.ranks_per_node);
    config.repetitions = repetitions;
    const ReduceOp op = builtin_op("sum", DType::int32);
    const Shape shape{c.nodes * c.ranks_per_node, c.bytes / op.element_bytes, c.blocks, 0};

    auto t0 = std::chrono::steady_clock::now();
    SimulationOptions sim;
    sim.model = config.model;
    sim.layout = config.layout;
    sim.element_bytes = op.element_bytes;
    const auto simulated = simulate(algorithm.plan(shape), shape.ranks, sim);
    const double simulate_s = seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    const EmulationResult r = emulate(algorithm, shape, op, config);
    const double total_s = seconds_since(t0);
    auto wall = r.wall_seconds;
    std::sort(wall.begin(), wall.end());
    const double per_rep_min = wall.front(), per_rep_median = wall[wall.size() / 2];

    std::printf("\n%s: %d ranks, %d blocks, %s\n", c.label, shape.ranks, r.blocks,
                r.verified ? "verified" : r.failure.c_str());
    std::printf("  emulate() call     %.3f s (target %.0f s): %.2fx under target\n", total_s, c.target_seconds,
                c.target_seconds / total_s);
    std::printf("  one repetition     min %.3f s, median %.3f s\n", per_rep_min, per_rep_median);
    std::printf("  set-up and checks  %.3f s (buffers, inputs, schedules, verification)\n",
                total_s - std::accumulate(wall.begin(), wall.end(), 0.0));
    std::printf("  virtual time       %.1f us (simulator %.1f us, computed in %.3f s)\n",
                to_seconds(r.virtual_time) * 1e6, to_seconds(simulated.time) * 1e6, simulate_s);
    std::printf("  per rank           %llu steps, %.1f MiB moved per repetition in all\n",
                static_cast<unsigned long long>(simulated.max_steps),
                static_cast<double>(simulated.elements_moved * op.element_bytes) / (1 << 20) / 1.0);
  }
}
