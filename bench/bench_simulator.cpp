// Simulator scale benchmark: one allreduce schedule over p ranks, reporting
// wall time, peak memory (max RSS) and throughput in steps per second.
// Usage: bench_simulator [p=1048576] [blocks=64] [algorithm=dual-root] [bytes=67108864]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"

int main(int argc, char** argv) {
  using namespace copse;
  const int p = argc > 1 ? std::atoi(argv[1]) : 1 << 20;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 64;
  const std::string name = argc > 3 ? argv[3] : "dual-root";
  const std::uint64_t bytes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 64u << 20;
  const auto& algorithm = find_algorithm(Collective::allreduce, name);
  SimulationOptions options;  // default one-level model
  options.model = CostModel::uniform(model_defaults::other_node, model_defaults::gamma, Ports::bidirectional);

  const auto t0 = std::chrono::steady_clock::now();
  const auto result = simulate(algorithm.plan(Shape{p, bytes, blocks, 0}), p, options);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("simulate %s p=%d blocks=%d bytes=%llu\n", name.c_str(), p, blocks,
              static_cast<unsigned long long>(bytes));
  std::printf("  simulated time %.6f s, longest rank %llu steps, %llu messages\n", to_seconds(result.time),
              static_cast<unsigned long long>(result.max_steps), static_cast<unsigned long long>(result.messages));
  // CPU time alongside wall time: on a shared machine the wall time also
  // counts whatever else ran.
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  std::printf("  wall %.2f s, cpu %.2f s, peak memory %.0f MiB, %.1f M messages per cpu-second\n", wall, cpu,
              static_cast<double>(usage.ru_maxrss) / 1024.0, static_cast<double>(result.messages) / cpu / 1e6);
}
