#include "node/calibrate.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/kernels.hpp"
#include "common/reduce_op.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "intranode/arena.hpp"
#include "intranode/link_engine.hpp"

namespace copse {

// ---- fitting -----------------------------------------------------------------------

Spread spread_of(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {values.front(), median, values.back()};
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

// ---- the model file --------------------------------------------------------------------

namespace {

std::string fixed(double value, int decimals, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f%s", decimals, value, unit);
  return text;
}
std::string as_ns(double seconds) { return fixed(seconds * 1e9, 1, "ns"); }
std::string as_ps(double seconds) { return fixed(seconds * 1e12, 3, "ps"); }
std::string percent(double fraction) { return fixed(fraction * 100, 1, " %"); }

std::string level_note(const LevelResult& level) {
  return level.level + " (" + level.description + "), " + level.link + ", ping-pong fit, residual " +
         percent(level.ping_pong.fit.residual);
}

double gamma_of(const Calibration& calibration) {
  std::vector<double> gammas;
  for (const auto& g : calibration.gamma) gammas.push_back(g.sweep.fit.beta);
  return spread_of(gammas).median;
}

constexpr std::string_view kHeader = "# copse calibrate";

}  // namespace

std::vector<ModelEntry> model_entries(const Calibration& calibration) {
  std::vector<ModelEntry> entries;
  for (const LevelResult& level : calibration.levels) {
    if (level.role.empty()) continue;
    const std::string note = level_note(level);
    if (level.role == "group")
      entries.push_back({"group_size", std::to_string(level.group_size), "cores sharing the " + level.level, {}});
    entries.push_back({level.role + "_alpha", as_ns(level.ping_pong.fit.alpha), note, {}});
    entries.push_back({level.role + "_beta", as_ps(level.ping_pong.fit.beta), note, {}});
  }
  // What the figures mean: half a round trip of copse's rendezvous links,
  // everything a message costs (under LogGP, alpha would be L alone and the
  // overheads o would come on top).
  if (!entries.empty())
    entries.push_back({"timing", "hockney", "alpha and beta are whole messages: n bytes take alpha + beta * n", {}});
  if (!calibration.gamma.empty()) {
    ModelEntry gamma{"gamma",
                     as_ps(gamma_of(calibration)),
                     "median over " + std::to_string(calibration.gamma.size()) + " reduction kernels",
                     {}};
    for (const auto& g : calibration.gamma)
      gamma.details.push_back(g.op + " " + g.dtype + ": " + as_ps(g.sweep.fit.beta) + " per byte (residual " +
                              percent(g.sweep.fit.residual) + ")");
    entries.push_back(std::move(gamma));
  }
  return entries;
}

void check_model_file(const std::string& path) {
  if (path.empty()) throw UsageError("--output: an empty file name");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || !line.starts_with(kHeader))
    throw UsageError("--output " + path + ": the file exists and was not written by copse calibrate; remove it or " +
                     "choose another file");
}

void write_model_file(const std::string& path, const Calibration& calibration) {
  check_model_file(path);
  const std::vector<ModelEntry> entries = model_entries(calibration);
  // A previous calibration's file: keep each key block (the key's line and
  // its detail comments) that this run does not replace.
  std::vector<std::pair<std::string, std::string>> kept;  // key, block
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // the header, checked above
    while (std::getline(in, line)) {
      const auto eq = line.find(" = ");
      const std::string key = line.substr(0, eq);
      if (eq != std::string::npos && !key.empty() &&
          key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos)
        kept.emplace_back(key, line + "\n");
      else if (line.starts_with("#   ") && !kept.empty())
        kept.back().second += line + "\n";
    }
  }
  std::ostringstream out;
  out << kHeader << ": the cost model measured here; alpha and beta per level by ping-pong over copse's links\n"
      << "# (copse calibrate, and copse_calibrate_mpi under mpirun), gamma over the reduction kernels.\n"
      << "# Use it with --config FILE or COPSE_CONFIG=FILE.\n"
      << "[model]\n";
  for (const ModelEntry& entry : entries) {
    out << entry.key << " = " << (entry.key == "group_size" ? entry.value : "\"" + entry.value + "\"") << "  # "
        << entry.note << "\n";
    for (const auto& detail : entry.details) out << "#   " << detail << "\n";
  }
  for (const auto& [key, block] : kept)
    if (std::none_of(entries.begin(), entries.end(), [&](const ModelEntry& e) { return e.key == key; })) out << block;
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << out.str();
    file.close();
    if (!file) throw SystemError("cannot write " + temporary + ": " + std::strerror(errno));
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw SystemError("cannot write " + path + ": " + ec.message());
}

// ---- reports ---------------------------------------------------------------------------

namespace {

std::string per_byte(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f ps/B", seconds * 1e12);
  std::string s = text;
  if (seconds > 0) {
    std::snprintf(text, sizeof text, " (%.2f GB/s)", 1e-9 / seconds);
    s += text;
  }
  return s;
}

std::string spread_text(const Spread& s, std::string (*format)(double)) {
  return "min " + format(s.min) + ", median " + format(s.median) + ", max " + format(s.max);
}

// A table cell: `text` in `width` columns, left or right aligned.
struct Cell {
  std::string text;
  int width;
  bool right = false;
};
std::ostream& operator<<(std::ostream& out, const Cell& cell) {
  return out << (cell.right ? std::right : std::left) << std::setw(cell.width) << cell.text << std::left;
}

std::string time_text(double seconds) { return format_time(seconds); }
std::string byte_text(double seconds) { return fixed(seconds * 1e12, 2, " ps/B"); }

void write_sweep_fit(std::ostream& out, const char* what, const Sweep& sweep, const char* alpha_name) {
  out << "  " << what << ": " << alpha_name << " " << format_time(sweep.fit.alpha) << " ("
      << spread_text(sweep.alpha, time_text) << "), beta " << per_byte(sweep.fit.beta) << " ("
      << spread_text(sweep.beta, byte_text) << "), residual " << percent(sweep.fit.residual)
      << (sweep.fit.clamped ? " (a coefficient clamped at 0)" : "") << "\n";
}

}  // namespace

std::string format_report(const Calibration& calibration, const std::string& output) {
  std::ostringstream out;
  const CalibrateOptions& o = calibration.options;
  out << "copse calibrate: " << calibration.machine << ", " << o.repetitions << " repetitions"
      << (o.quick ? " (quick)" : "") << "\n";
  out << "Times per message (ping-pong: half a round trip; stream: back to back), min / median / max over the\n"
         "repetitions. Fits (alpha + beta * size) by least squares on relative errors over each size's fastest\n"
         "repetition; in parentheses the fits of each repetition alone; residual: rms relative error of the fit.\n";
  for (const LevelResult& level : calibration.levels) {
    out << "\nlevel " << level.level << ": " << level.description << "; " << level.pair << ", " << level.link;
    if (!level.role.empty()) out << " -> model " << level.role;
    out << "\n";
    out << "  " << Cell{"size", 10} << Cell{"ping-pong min", 15, true} << Cell{"median", 11, true}
        << Cell{"max", 11, true} << Cell{"fit", 11, true} << Cell{"stream min", 13, true} << Cell{"median", 11, true}
        << Cell{"max", 11, true} << "\n";
    for (std::size_t s = 0; s < level.ping_pong.bytes.size(); ++s) {
      const Spread pp = spread_of(level.ping_pong.seconds[s]), st = spread_of(level.stream.seconds[s]);
      const double fit =
          level.ping_pong.fit.alpha + level.ping_pong.fit.beta * static_cast<double>(level.ping_pong.bytes[s]);
      out << "  " << Cell{format_bytes(level.ping_pong.bytes[s]), 10} << Cell{format_time(pp.min), 15, true}
          << Cell{format_time(pp.median), 11, true} << Cell{format_time(pp.max), 11, true}
          << Cell{format_time(fit), 11, true} << Cell{format_time(st.min), 13, true}
          << Cell{format_time(st.median), 11, true} << Cell{format_time(st.max), 11, true} << "\n";
    }
    write_sweep_fit(out, "ping-pong", level.ping_pong, "alpha");
    write_sweep_fit(out, "stream   ", level.stream, "alpha");
  }
  for (const auto& line : calibration.skipped) out << "\nnot measured: " << line;
  if (!calibration.skipped.empty()) out << "\n";
  if (!calibration.gamma.empty()) {
    out << "\ngamma: time per combined byte of the reduction kernels, "
        << format_bytes(calibration.gamma.front().sweep.bytes.front()) << " to "
        << format_bytes(calibration.gamma.front().sweep.bytes.back()) << "\n";
    out << "  " << Cell{"op", 6} << Cell{"type", 8} << Cell{"gamma", 12, true} << Cell{"min", 12, true}
        << Cell{"median", 12, true} << Cell{"max", 12, true} << Cell{"GB/s", 8, true} << Cell{"residual", 10, true}
        << Cell{"per call", 11, true} << "\n";
    for (const GammaResult& g : calibration.gamma) {
      const Sweep& s = g.sweep;
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f", s.fit.beta > 0 ? 1e-9 / s.fit.beta : 0.0);
      out << "  " << Cell{g.op, 6} << Cell{g.dtype, 8} << Cell{byte_text(s.fit.beta), 12, true}
          << Cell{byte_text(s.beta.min), 12, true} << Cell{byte_text(s.beta.median), 12, true}
          << Cell{byte_text(s.beta.max), 12, true} << Cell{rate, 8, true} << Cell{percent(s.fit.residual), 10, true}
          << Cell{format_time(s.fit.alpha), 11, true} << "\n";
    }
  }
  out << "\nmodel file " << output << ":\n";
  for (const ModelEntry& entry : model_entries(calibration))
    out << "  " << Cell{entry.key, 12} << " = " << Cell{entry.value, 12} << "  " << entry.note << "\n";
  return out.str();
}

std::string report_json(const Calibration& calibration, const std::string& output) {
  using Json = nlohmann::ordered_json;
  const auto spread = [](const Spread& s) { return Json{{"min", s.min}, {"median", s.median}, {"max", s.max}}; };
  const auto sweep = [&](const Sweep& s) {
    Json sizes = Json::array();
    for (std::size_t i = 0; i < s.bytes.size(); ++i) {
      const Spread t = spread_of(s.seconds[i]);
      sizes.push_back({{"bytes", s.bytes[i]}, {"min", t.min}, {"median", t.median}, {"max", t.max}});
    }
    return Json{{"alpha", s.fit.alpha},
                {"beta", s.fit.beta},
                {"residual", s.fit.residual},
                {"clamped", s.fit.clamped},
                {"alpha_spread", spread(s.alpha)},
                {"beta_spread", spread(s.beta)},
                {"sizes", std::move(sizes)}};
  };
  Json levels = Json::array();
  for (const LevelResult& l : calibration.levels) {
    Json level{{"level", l.level},
               {"description", l.description},
               {"pair", l.pair},
               {"link", l.link},
               {"role", l.role.empty() ? Json(nullptr) : Json(l.role)},
               {"ping_pong", sweep(l.ping_pong)},
               {"stream", sweep(l.stream)}};
    if (l.role == "group") level["group_size"] = l.group_size;
    levels.push_back(std::move(level));
  }
  Json gamma = Json::array();
  for (const GammaResult& g : calibration.gamma) {
    const Sweep& s = g.sweep;
    gamma.push_back({{"op", g.op},
                     {"dtype", g.dtype},
                     {"gamma", s.fit.beta},
                     {"gamma_spread", spread(s.beta)},
                     {"per_call", s.fit.alpha},
                     {"residual", s.fit.residual}});
  }
  Json model = Json::object();
  for (const ModelEntry& entry : model_entries(calibration)) {
    if (entry.key == "group_size")
      model[entry.key] = {{"text", entry.value}, {"value", std::stoi(entry.value)}};
    else if (entry.key == "timing")
      model[entry.key] = {{"text", entry.value}, {"value", entry.value}};
    else
      model[entry.key] = {{"text", entry.value}, {"value", parse_time(entry.value)}};
  }
  const CalibrateOptions& o = calibration.options;
  return Json{{"machine", calibration.machine},
              {"repetitions", o.repetitions},
              {"max_bytes", o.max_bytes},
              {"quick", o.quick},
              {"levels", std::move(levels)},
              {"not_measured", calibration.skipped},
              {"gamma", std::move(gamma)},
              {"model", std::move(model)},
              {"output", output}}
      .dump(2);
}

}  // namespace copse
