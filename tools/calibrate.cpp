#include "tools/calibrate.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <set>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/kernels.hpp"
#include "common/reduce_op.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"

namespace copse {

// ---- fitting -----------------------------------------------------------------------

Spread spread_of(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  return {values.front(), median_of_sorted(values), values.back()};
}

// Relative errors: with u = 1/t and v = x/t, minimise sum (1 - alpha*u - beta*v)^2,
// a regression without intercept. Sums in long double (u ~ 1e6, v ~ 1e10).
LinearFit fit_alpha_beta(std::span<const double> bytes, std::span<const double> seconds) {
  if (bytes.size() != seconds.size() || bytes.size() < 2)
    throw UsageError("a fit of alpha and beta needs at least two sizes, each with one time");
  long double uu = 0, uv = 0, vv = 0, u1 = 0, v1 = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (!(seconds[i] > 0) || !std::isfinite(seconds[i]))
      throw UsageError("a fit of alpha and beta needs positive, finite times (got " + std::to_string(seconds[i]) +
                       " s at " + std::to_string(bytes[i]) + " B)");
    const long double u = 1.0L / seconds[i], v = bytes[i] / static_cast<long double>(seconds[i]);
    uu += u * u, uv += u * v, vv += v * v, u1 += u, v1 += v;
  }
  const long double det = uu * vv - uv * uv;
  if (!(det > 1e-12L * uu * vv)) throw UsageError("a fit of alpha and beta needs at least two different sizes");
  LinearFit fit;
  long double alpha = (vv * u1 - uv * v1) / det, beta = (uu * v1 - uv * u1) / det;
  if (alpha < 0) alpha = 0, beta = v1 / vv, fit.clamped = true;
  if (beta < 0) beta = 0, alpha = u1 / uu, fit.clamped = true;
  fit.alpha = static_cast<double>(alpha);
  fit.beta = static_cast<double>(beta);
  long double squares = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const long double e = (seconds[i] - alpha - beta * bytes[i]) / seconds[i];
    squares += e * e;
  }
  fit.residual = static_cast<double>(std::sqrt(squares / static_cast<long double>(bytes.size())));
  return fit;
}

void analyse(Sweep& sweep) {
  std::vector<double> x(sweep.bytes.begin(), sweep.bytes.end()), fastest;
  std::size_t repetitions = SIZE_MAX;
  for (const auto& times : sweep.seconds) {
    fastest.push_back(spread_of(times).min);
    repetitions = std::min(repetitions, times.size());
  }
  sweep.fit = fit_alpha_beta(x, fastest);
  std::vector<double> alphas, betas, one(x.size());
  for (std::size_t r = 0; r < repetitions; ++r) {
    for (std::size_t s = 0; s < x.size(); ++s) one[s] = sweep.seconds[s][r];
    const LinearFit fit = fit_alpha_beta(x, one);
    alphas.push_back(fit.alpha);
    betas.push_back(fit.beta);
  }
  sweep.alpha = spread_of(alphas);
  sweep.beta = spread_of(betas);
}

// ---- options and sizes --------------------------------------------------------------

namespace {

constexpr std::uint64_t kMinBytes = 8;
constexpr std::uint64_t kMaxMaxBytes = std::uint64_t{1} << 30;
constexpr std::uint64_t kQuickMaxBytes = std::uint64_t{256} << 10;

}  // namespace

void check_options(const CalibrateOptions& options) {
  if (options.repetitions < 1) throw UsageError("--repetitions must be at least 1");
  if (options.max_bytes < 2 * kMinBytes)
    throw UsageError("--max-bytes must be at least 16 B (two sizes to fit alpha and beta), got " +
                     std::to_string(options.max_bytes));
  if (options.max_bytes > kMaxMaxBytes)
    throw UsageError("--max-bytes must be at most 1 GiB, got " + format_bytes(options.max_bytes));
  if (options.wait_timeout.count() <= 0) throw UsageError("the wait timeout must be positive");
}

std::vector<std::uint64_t> sweep_sizes(const CalibrateOptions& options) {
  const std::uint64_t top = options.quick ? std::min(options.max_bytes, kQuickMaxBytes) : options.max_bytes;
  std::vector<std::uint64_t> sizes{kMinBytes};
  for (std::uint64_t n = kMinBytes * (options.quick ? 4 : 2); n < top; n *= options.quick ? 4 : 2) sizes.push_back(n);
  if (sizes.back() != top) sizes.push_back(top);
  return sizes;
}

// ---- core pairs -----------------------------------------------------------------------

std::vector<CorePair> core_pairs(const Machine& machine, std::span<const int> usable,
                                 std::vector<std::string>& skipped) {
  // One PU per core among those this process may use.
  std::vector<int> pus;
  std::set<int> cores;
  for (int pu = 0; pu < machine.pus(); ++pu) {
    if (std::find(usable.begin(), usable.end(), machine.os_index(pu)) == usable.end()) continue;
    const int core = machine.container("core", pu);
    if (cores.insert(core >= 0 ? core : -1 - pu).second) pus.push_back(pu);
  }
  struct Level {
    const char* name;
    const char* description;
  };
  static constexpr Level kLevels[] = {{"l2", "cores sharing an L2"},
                                      {"l3", "cores sharing an L3, not an L2"},
                                      {"package", "cores sharing a package, not an L3"},
                                      {"machine", "cores in different packages"}};
  // A pair's level: the finest object of these the two cores share.
  const auto level_of = [&](int a, int b) -> std::string {
    for (const char* level : {"l2", "l3", "package"})
      if (machine.has_level(level) && machine.container(level, a) >= 0 &&
          machine.container(level, a) == machine.container(level, b))
        return level;
    return "machine";
  };
  std::vector<CorePair> pairs;
  for (const Level& level : kLevels) {
    bool found = false;
    for (std::size_t i = 0; i < pus.size() && !found; ++i)
      for (std::size_t j = i + 1; j < pus.size() && !found; ++j) {
        if (level_of(pus[i], pus[j]) != level.name) continue;
        CorePair pair{level.name, level.description, pus[i], pus[j], 0};
        if (pair.level != "machine") {
          const int shared = machine.container(pair.level, pair.pu_a);
          for (int pu : pus) pair.group_cores += machine.container(pair.level, pu) == shared ? 1 : 0;
        }
        pairs.push_back(pair);
        found = true;
      }
    if (!found)
      skipped.push_back(std::string(level.description) + ": none among the " + std::to_string(pus.size()) +
                        (pus.size() == 1 ? " core" : " cores") + " this process may use; not measured");
  }
  return pairs;
}

// ---- a pair of ranks ------------------------------------------------------------------

namespace {

// Messages per timed run: enough bytes to outlast the clock's and the
// run's own costs, bounded so that small messages do not take all day.
int iterations(std::uint64_t bytes, bool quick) {
  const double target = quick ? 256.0 * 1024 : 4.0 * 1024 * 1024;
  const double k = target / static_cast<double>(bytes);
  return static_cast<int>(std::clamp(k, quick ? 2.0 : 4.0, quick ? 16.0 : 100.0));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PairSweeps run_pair(StepExecutor& executor, LinkRank& c, std::byte* buffer, const std::vector<std::uint64_t>& sizes,
                    const CalibrateOptions& options) {
  const ReduceOp op = builtin_op("sum", DType::uint8);  // elements are bytes; transfers only copy
  const int me = c.rank, peer = 1 - c.rank;
  const auto send = [&](std::uint64_t n) {
    Step s;
    s.send = Transfer{peer, 0, n};
    return s;
  };
  const auto recv = [&](std::uint64_t n) {
    Step s;
    s.recv = Transfer{peer, 0, n};
    return s;
  };
  // Before each timed run, a one-byte round trip: rank 0 starts its clock as
  // rank 1 enters the run.
  const std::vector<Step> sync = me == 0 ? std::vector<Step>{send(1), recv(1)} : std::vector<Step>{recv(1), send(1)};
  const auto run = [&](const std::vector<Step>& steps) {
    ++c.round;
    const auto t0 = std::chrono::steady_clock::now();
    executor.run(c, steps, buffer, nullptr, op);
    return seconds_since(t0);
  };
  PairSweeps out;
  if (me == 0) {
    out.ping_pong.bytes = out.stream.bytes = sizes;
    out.ping_pong.seconds.resize(sizes.size());
    out.stream.seconds.resize(sizes.size());
  }
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const std::uint64_t n = sizes[s];
    const int k = iterations(n, options.quick);
    std::vector<Step> ping_pong, stream;
    for (int i = 0; i < k; ++i) {
      ping_pong.push_back(me == 0 ? send(n) : recv(n));
      ping_pong.push_back(me == 0 ? recv(n) : send(n));
      stream.push_back(me == 0 ? send(n) : recv(n));
    }
    stream.push_back(me == 0 ? recv(1) : send(1));  // the end of the stream, back to rank 0
    for (int rep = 0; rep < options.repetitions; ++rep) {
      run(sync);
      const double round_trips = run(ping_pong);
      run(sync);
      const double streamed = run(stream);
      if (me != 0) continue;
      out.ping_pong.seconds[s].push_back(round_trips / (2.0 * k));
      out.stream.seconds[s].push_back(streamed / k);
    }
  }
  if (me == 0) {
    analyse(out.ping_pong);
    analyse(out.stream);
  }
  return out;
}

// ---- the node's levels ---------------------------------------------------------------

namespace {

std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    throw SystemError(std::string("sched_getaffinity: ") + std::strerror(errno));
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

void pin_to(int os_cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(os_cpu, &set);
  if (const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); rc != 0)
    throw SystemError("cannot pin a thread to CPU " + std::to_string(os_cpu) + ": " + std::strerror(rc));
}

// Two threads pinned to the pair's PUs, over one shared-memory link engine.
LevelResult measure_threads(const Machine& machine, const CorePair& pair, const CalibrateOptions& options,
                            const std::vector<std::uint64_t>& sizes) {
  HeapArena arena;
  LinkEngine engine(
      arena, LinkEngine::create_shared(arena, 2),
      executor_config(RankMap::uniform(2, 2), std::nullopt, wait_settings(options.wait_timeout, "measurement")));
  const std::size_t bytes = static_cast<std::size_t>(sizes.back());
  std::byte* buffers[2] = {arena.address(arena.allocate(bytes, 4096)), arena.address(arena.allocate(bytes, 4096))};
  const int cpus[2] = {machine.os_index(pair.pu_a), machine.os_index(pair.pu_b)};
  PairSweeps results[2];
  std::exception_ptr errors[2];
  const auto body = [&](int r) {
    try {
      pin_to(cpus[r]);
      std::memset(buffers[r], r + 1, bytes);  // first touched where it is used
      LinkRank c;
      c.rank = r;
      StepExecutor executor(engine);
      results[r] = run_pair(executor, c, buffers[r], sizes, options);
    } catch (...) {
      errors[r] = std::current_exception();
      engine.abort();
    }
  };
  {
    std::thread other(body, 1);
    body(0);  // this thread is the pair's own (measure_node_levels), so pinning it is harmless
    other.join();
  }
  for (const auto& error : errors) {
    if (!error) continue;
    try {
      std::rethrow_exception(error);
    } catch (const LinkAborted&) {
      // the other rank's error is the one to report
    }
  }
  LevelResult level;
  level.level = pair.level;
  level.description = pair.description;
  level.pair = "PU L#" + std::to_string(pair.pu_a) + " and L#" + std::to_string(pair.pu_b) + " (CPUs " +
               std::to_string(cpus[0]) + " and " + std::to_string(cpus[1]) + ")";
  level.link = "shared-memory link, threads";
  level.ping_pong = std::move(results[0].ping_pong);
  level.stream = std::move(results[0].stream);
  return level;
}

}  // namespace

std::vector<LevelResult> measure_node_levels(const Machine& machine, const CalibrateOptions& options,
                                             std::vector<std::string>& skipped) {
  check_options(options);
  const std::vector<int> usable = usable_cpus();
  const std::vector<CorePair> pairs = core_pairs(machine, usable, skipped);
  const std::vector<std::uint64_t> sizes = sweep_sizes(options);
  std::vector<LevelResult> levels;
  // Each pair on threads of its own, so that this thread's affinity -- the
  // process's, which the links' spinning counts cores by -- stays as it is.
  for (const CorePair& pair : pairs) {
    LevelResult level;
    std::exception_ptr error;
    std::thread([&] {
      try {
        level = measure_threads(machine, pair, options, sizes);
      } catch (...) {
        error = std::current_exception();
      }
    }).join();
    if (error) std::rethrow_exception(error);
    level.group_size = pair.group_cores;
    levels.push_back(std::move(level));
  }
  if (levels.size() == 1) levels.front().role = "intra";
  if (levels.size() >= 2) {
    levels.front().role = "group";
    levels.back().role = "intra";
  }
  return levels;
}

// ---- gamma --------------------------------------------------------------------------

std::vector<GammaResult> measure_gamma(const CalibrateOptions& options) {
  check_options(options);
  // From 4 KiB (a call's own cost does not drown the bytes) to the sweep's top.
  std::vector<std::uint64_t> sizes;
  const std::uint64_t top = sweep_sizes(options).back();
  for (std::uint64_t n = std::min<std::uint64_t>(4096, top / 2); n < top; n *= options.quick ? 4 : 2)
    sizes.push_back(n);
  sizes.push_back(top);
  std::vector<std::byte> a(static_cast<std::size_t>(top)), b(static_cast<std::size_t>(top));
  std::vector<GammaResult> results;
  for (const char* name : {"sum", "max", "prod"})
    for (DType dtype : {DType::int32, DType::int64, DType::float32, DType::float64}) {
      const ReduceOp op = builtin_op(name, dtype);
      GammaResult result{name, std::string(to_string(dtype)), {}};
      Sweep& sweep = result.sweep;
      for (std::uint64_t bytes : sizes) {
        const std::uint64_t n = bytes / op.element_bytes;
        if (n == 0) continue;
        // Operands that stay finite under repeated passes: fill_input's small values.
        fill_input(op, 0, n, a.data());
        fill_input(op, 1, n, b.data());
        const int passes = iterations(bytes, options.quick);
        std::vector<double> times;
        for (int rep = 0; rep < options.repetitions; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int p = 0; p < passes; ++p) op.combine(a.data(), b.data(), static_cast<std::size_t>(n), Combine::left);
          times.push_back(seconds_since(t0) / passes);
        }
        sweep.bytes.push_back(n * op.element_bytes);
        sweep.seconds.push_back(std::move(times));
      }
      analyse(sweep);
      results.push_back(std::move(result));
    }
  return results;
}

Calibration calibrate_node(const CalibrateOptions& options) {
  check_options(options);
  const Machine machine = Machine::detect();
  Calibration calibration;
  calibration.machine = machine.source();
  calibration.options = options;
  calibration.levels = measure_node_levels(machine, options, calibration.skipped);
  calibration.gamma = measure_gamma(options);
  return calibration;
}

}  // namespace copse
