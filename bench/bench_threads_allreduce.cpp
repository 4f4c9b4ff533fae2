// copse's allreduce among T threads of one process, and the streaming bound,
// measured the way bench/mpi_allreduce.cpp measures Open MPI; and the report
// that puts both side by side. scripts/bench-vs-mpi.sh runs the whole thing.
//
// Measure mode (the default): for each thread count T, one Team of T ranks on
// this machine; each rank is a thread (bound to its own core when T <= cores,
// as mpirun binds T <= cores processes; unbound when oversubscribed, as the
// script runs mpirun with --bind-to none). For each size, all in the same
// threads, one after the other:
//   copse  comm.allreduce(send, recv, count, sum over float32)
//   copy   memcpy(recv, send, size)          -- the streaming bound
//   add    recv[i] += send[i] over float32    -- the same with a reduction
// each timed by the mpicroscope method: a few untimed warm-up calls, then
// `reps` repetitions of { barrier; t0; operation; t1 }, each thread keeping its
// own t1 - t0; per repetition the slowest thread's time counts; min and median
// over repetitions are reported. One exception, for the bound when T exceeds
// the cores: the threads then take turns on the cores, each one's own t1 - t0
// no longer overlaps the others' and would show a single thread's copy, so the
// bound is the span from the first thread's t0 to the last one's t1 (for a
// collective the slowest rank already waits for the late ones).
// copse's result is verified against the exact
// expected sum after the first call of every size (the receive buffer is
// poisoned first) and again after the last timed repetition.
//
// Data: float32 sum, rank r's element i is (r + 1) * (i % 8 + 1), the same as
// mpi_allreduce, so the sum is exact. Sizes and repetition counts follow the
// same rule as mpi_allreduce (duplicated there: the programs share no code).
//
// Raw results (--raw FILE, appended): one line per (implementation, T, size):
//   label <TAB> T <TAB> bytes <TAB> ok|FAIL <TAB> t_1,t_2,...   (seconds, slowest rank per repetition)
// mpi_allreduce writes the same format with labels "tuned" and "han".
//
// Report mode (--report FILE): merges every line of the raw file (several
// rounds of the same (label, T, size) are pooled: min and median over all
// their repetitions) and prints one table per T:
//   size | copse min/median | tuned min/median | han min/median | tuned/copse |
//   han/copse | copy bound | a+=b bound | copse/copy
// Ratios are given as "by min  by median". For T = 2 a goal column checks the
// issue's target: copse no slower than either Open MPI configuration at every
// size, and at least 1.5x faster from 16 KiB up.
//
// Usage:
//   bench_threads_allreduce [--threads 2,4,8] [--quick] [--max-bytes SIZE]
//                           [--raw FILE] [--barrier copse|std] [--bind auto|none]
//   bench_threads_allreduce --report FILE
// Exit status: 0 when every result verified, 1 on a wrong result (or a FAIL
// line in the report), 2 on bad usage.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/reduce_op.hpp"
#include "runtime/comm.hpp"

namespace {

using namespace copse;
using Clock = std::chrono::steady_clock;

// ---- sizes and repetitions: keep in step with bench/mpi_allreduce.cpp ------

// Sizes in bytes: 8 B, then powers of 4 from 16 B to 64 MiB. --quick: five sizes.
std::vector<std::size_t> bench_sizes(bool quick, std::size_t max_bytes) {
  std::vector<std::size_t> sizes;
  if (quick) {
    sizes = {8, 1u << 10, 64u << 10, 1u << 20, 16u << 20};
  } else {
    sizes.push_back(8);
    for (std::size_t s = 16; s <= (64u << 20); s *= 4) sizes.push_back(s);
  }
  std::erase_if(sizes, [&](std::size_t s) { return s > max_bytes; });
  return sizes;
}

// Timed repetitions per size: about 512 MiB (quick: 16 MiB) of payload per rank, within bounds.
int bench_reps(bool quick, std::size_t bytes) {
  const std::size_t budget = quick ? (16u << 20) : (512u << 20);
  const std::size_t lo = quick ? 5 : 20, hi = quick ? 50 : 1000;
  return static_cast<int>(std::clamp(budget / bytes, lo, hi));
}

constexpr int kWarmup = 2;

float input(int rank, std::size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 8 + 1)); }

float expected(int ranks, std::size_t i) {
  return static_cast<float>(ranks * (ranks + 1) / 2 * static_cast<int>(i % 8 + 1));
}

// ---- small helpers ----------------------------------------------------------

std::size_t parse_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  const std::string unit(end);
  if (unit == "K" || unit == "KiB")
    v *= 1024;
  else if (unit == "M" || unit == "MiB")
    v *= 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    return 0;
  return static_cast<std::size_t>(v);
}

std::string human(std::size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes >> 10);
  else
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  return buf;
}

// Microseconds, three significant figures or so, right-aligned in `width`.
std::string us(double seconds, int width = 9) {
  char buf[48];
  const double v = seconds * 1e6;
  std::snprintf(buf, sizeof buf, v < 10 ? "%*.2f" : v < 1000 ? "%*.1f" : "%*.0f", width, v);
  return buf;
}

std::string ratio(double r, int width = 5) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r < 100 ? "%*.2f" : "%*.0f", width, r);
  return buf;
}

double min_of(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Buffer {
  float* data = nullptr;
  explicit Buffer(std::size_t bytes) {
    const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
    data = static_cast<float*>(std::aligned_alloc(4096, rounded));
    if (!data) throw std::bad_alloc();
    std::memset(data, 0, rounded);  // first touch by the owning thread
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// a += b, elementwise over float32; the loop the compiler vectorises.
__attribute__((noinline)) void add_into(float* __restrict a, const float* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}

// ---- measure mode -----------------------------------------------------------

struct MeasureOptions {
  std::vector<int> threads{2, 4, 8};
  bool quick = false;
  std::size_t max_bytes = 64u << 20;
  std::string raw_path;
  bool std_barrier = false;  // time against std::barrier instead of copse's comm.barrier()
  bool bind = true;          // one core per thread when T <= cores
};

struct Row {  // one (implementation, size): per repetition, the slowest rank
  std::string label;
  std::size_t bytes = 0;
  bool ok = true;
  std::vector<double> slowest;
};

// Runs one thread count; returns the rows (copse, copy, add per size).
std::vector<Row> measure(int T, const MeasureOptions& o, std::string& failure) {
  const std::vector<std::size_t> sizes = bench_sizes(o.quick, o.max_bytes);
  const std::size_t largest = sizes.empty() ? 8 : sizes.back();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const bool oversubscribed = static_cast<unsigned>(T) > cores;
  const bool bind = o.bind && !oversubscribed;
  const ReduceOp op = builtin_op("sum", DType::float32);

  TeamOptions team_options;
  team_options.ranks = T;
  Team team(team_options);

  // stamps[label index][rank][rep] = (start, end); the labels in this order per size.
  using Stamps = std::vector<std::pair<Clock::time_point, Clock::time_point>>;
  static constexpr const char* kLabels[] = {"copse", "copy", "add"};
  std::vector<std::vector<Stamps>> stamps(3, std::vector<Stamps>(static_cast<std::size_t>(T)));
  std::vector<std::string> wrong(static_cast<std::size_t>(T));  // per rank, for the current size
  std::vector<Row> rows;
  std::barrier<> sync(T);  // untimed hand-offs between ranks (and the timed barrier with --barrier std)

  auto worker = [&](int rank) {
    try {
      if (bind) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(static_cast<unsigned>(rank) % cores, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
      }
      Comm& comm = team.comm(rank);
      Buffer send(largest), recv(largest);
      for (std::size_t i = 0; i < largest / sizeof(float); ++i) send.data[i] = input(rank, i);
      auto timed_barrier = [&] {
        if (o.std_barrier)
          sync.arrive_and_wait();
        else
          comm.barrier();
      };
      const auto r = static_cast<std::size_t>(rank);

      for (const std::size_t bytes : sizes) {
        const std::size_t count = bytes / sizeof(float);
        const auto reps = static_cast<std::size_t>(bench_reps(o.quick, bytes));
        auto check = [&](const char* when) {
          if (!wrong[r].empty()) return;
          for (std::size_t i = 0; i < count; ++i)
            if (recv.data[i] != expected(T, i)) {
              char buf[160];
              std::snprintf(buf, sizeof buf, "rank %d, %s, %s: element %zu is %g, expected %g", rank,
                            human(bytes).c_str(), when, i, static_cast<double>(recv.data[i]),
                            static_cast<double>(expected(T, i)));
              wrong[r] = buf;
              return;
            }
        };
        auto run = [&](Stamps& out, auto&& operation) {
          out.resize(reps);
          for (std::size_t k = 0; k < reps; ++k) {
            timed_barrier();
            const auto t0 = Clock::now();
            operation();
            out[k] = {t0, Clock::now()};
          }
        };
        auto allreduce = [&] { comm.allreduce(send.data, recv.data, count, op); };

        wrong[r].clear();
        std::fill(recv.data, recv.data + count, -1.0f);
        allreduce();  // first call of this shape: plans, then verified
        check("first call");
        for (int w = 0; w < kWarmup; ++w) allreduce();
        run(stamps[0][r], allreduce);
        check("after the timed repetitions");

        std::memcpy(recv.data, send.data, bytes);  // warm-up
        run(stamps[1][r], [&] { std::memcpy(recv.data, send.data, bytes); });
        add_into(recv.data, send.data, count);  // warm-up
        run(stamps[2][r], [&] { add_into(recv.data, send.data, count); });

        sync.arrive_and_wait();
        if (rank == 0) {
          for (std::size_t l = 0; l < 3; ++l) {
            Row row{kLabels[l], bytes, true, std::vector<double>(reps, 0.0)};
            const bool span = l > 0 && oversubscribed;
            for (std::size_t k = 0; k < reps; ++k) {
              Clock::time_point first = stamps[l][0][k].first, last = stamps[l][0][k].second;
              Clock::duration slowest{0};
              for (std::size_t q = 0; q < static_cast<std::size_t>(T); ++q) {
                const auto [t0, t1] = stamps[l][q][k];
                first = std::min(first, t0);
                last = std::max(last, t1);
                slowest = std::max(slowest, t1 - t0);
              }
              row.slowest[k] = std::chrono::duration<double>(span ? last - first : slowest).count();
            }
            if (l == 0)
              for (const std::string& w : wrong)
                if (!w.empty()) {
                  row.ok = false;
                  if (failure.empty()) failure = w;
                }
            rows.push_back(std::move(row));
          }
        }
        sync.arrive_and_wait();
      }
    } catch (const std::exception& e) {
      // The other ranks would wait for this one forever (or until copse's timeout).
      std::fprintf(stderr, "bench_threads_allreduce: T=%d rank %d: %s\n", T, rank, e.what());
      std::fflush(stderr);
      std::_Exit(1);
    }
  };

  std::vector<std::thread> pool;
  for (int rank = 0; rank < T; ++rank) pool.emplace_back(worker, rank);
  for (auto& t : pool) t.join();
  return rows;
}

int run_measure(const MeasureOptions& o) {
  std::FILE* raw = nullptr;
  if (!o.raw_path.empty() && !(raw = std::fopen(o.raw_path.c_str(), "a"))) {
    std::fprintf(stderr, "bench_threads_allreduce: cannot open %s\n", o.raw_path.c_str());
    return 2;
  }
  bool all_ok = true;
  for (const int T : o.threads) {
    std::string failure;
    const std::vector<Row> rows = measure(T, o, failure);
    std::printf("copse allreduce, %d threads, float32 sum, barrier %s; times in us, slowest rank per repetition%s\n", T,
                o.std_barrier ? "std::barrier" : "comm.barrier()",
                static_cast<unsigned>(T) > std::max(1u, std::thread::hardware_concurrency())
                    ? " (copy, a+=b: span of all threads)"
                    : "");
    std::printf("%10s %6s %10s %10s %10s %10s %10s %10s %8s  %s\n", "size", "reps", "copse min", "median", "copy min",
                "median", "a+=b min", "median", "copse/copy", "check");
    for (std::size_t i = 0; i + 2 < rows.size(); i += 3) {
      const Row &c = rows[i], &cp = rows[i + 1], &ad = rows[i + 2];
      std::printf("%10s %6zu %s %s %s %s %s %s %s  %s\n", human(c.bytes).c_str(), c.slowest.size(),
                  us(min_of(c.slowest), 10).c_str(), us(median_of(c.slowest), 10).c_str(),
                  us(min_of(cp.slowest), 10).c_str(), us(median_of(cp.slowest), 10).c_str(),
                  us(min_of(ad.slowest), 10).c_str(), us(median_of(ad.slowest), 10).c_str(),
                  ratio(min_of(c.slowest) / min_of(cp.slowest), 10).c_str(), c.ok ? "ok" : "WRONG");
    }
    if (!failure.empty()) {
      std::fprintf(stderr, "bench_threads_allreduce: wrong result: %s\n", failure.c_str());
      all_ok = false;
    }
    std::fflush(stdout);
    if (raw) {
      for (const Row& row : rows) {
        std::fprintf(raw, "%s\t%d\t%zu\t%s\t", row.label.c_str(), T, row.bytes, row.ok ? "ok" : "FAIL");
        for (std::size_t k = 0; k < row.slowest.size(); ++k) std::fprintf(raw, k ? ",%.9g" : "%.9g", row.slowest[k]);
        std::fprintf(raw, "\n");
      }
      std::fflush(raw);
    }
  }
  if (raw) std::fclose(raw);
  return all_ok ? 0 : 1;
}

// ---- report mode ------------------------------------------------------------

struct Pooled {
  std::vector<double> times;
  bool ok = true;
  int runs = 0;
};

int run_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "bench_threads_allreduce: cannot read %s\n", path.c_str());
    return 2;
  }
  // (T, bytes, label) -> pooled repetitions
  std::map<std::tuple<int, std::size_t, std::string>, Pooled> data;
  std::map<int, std::vector<std::size_t>> sizes_of;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string label, t_text, bytes_text, status, list;
    if (!std::getline(fields, label, '\t') || !std::getline(fields, t_text, '\t') ||
        !std::getline(fields, bytes_text, '\t') || !std::getline(fields, status, '\t') ||
        !std::getline(fields, list, '\t')) {
      std::fprintf(stderr, "bench_threads_allreduce: %s:%d: not a raw result line\n", path.c_str(), line_no);
      return 2;
    }
    const int T = std::atoi(t_text.c_str());
    const std::size_t bytes = std::strtoull(bytes_text.c_str(), nullptr, 10);
    Pooled& p = data[{T, bytes, label}];
    p.ok = p.ok && status == "ok";
    ++p.runs;
    std::istringstream values(list);
    for (std::string v; std::getline(values, v, ',');) p.times.push_back(std::strtod(v.c_str(), nullptr));
    auto& sizes = sizes_of[T];
    if (std::find(sizes.begin(), sizes.end(), bytes) == sizes.end()) sizes.push_back(bytes);
  }

  bool all_ok = true;
  for (const auto& [pooled_key, p] : data)
    if (!p.ok) {
      all_ok = false;
      std::printf("VERIFICATION FAILED: %s, T=%d, %s\n", std::get<2>(pooled_key).c_str(), std::get<0>(pooled_key),
                  human(std::get<1>(pooled_key)).c_str());
    }

  auto find = [&](int T, std::size_t bytes, const char* label) -> const Pooled* {
    auto it = data.find({T, bytes, label});
    return it == data.end() || it->second.times.empty() ? nullptr : &it->second;
  };
  auto pair = [&](const Pooled* p) {
    if (!p) return std::string("        -         -");
    return us(min_of(p->times)) + " " + us(median_of(p->times)) + (p->ok ? "" : "!");
  };
  // "by min  by median" of a / b, where a and b are pooled times
  auto ratios = [&](const Pooled* a, const Pooled* b) {
    if (!a || !b) return std::string("    -     -");
    return ratio(min_of(a->times) / min_of(b->times)) + " " + ratio(median_of(a->times) / median_of(b->times));
  };

  for (auto& [T, sizes] : sizes_of) {
    std::sort(sizes.begin(), sizes.end());
    const bool goal = T == 2;
    int runs = 0;
    if (const Pooled* c = find(T, sizes.front(), "copse")) runs = c->runs;
    std::printf("\nT = %d  (float32 sum; times in us: min and median over repetitions of the slowest rank;\n", T);
    std::printf("        ratios as 'by min  by median'; %d run(s) of each side pooled)\n", runs);
    std::printf("%9s | %19s | %19s | %19s | %11s | %11s | %9s | %9s | %11s%s\n", "size", "copse  min   median",
                "tuned  min   median", "han  min   median", "tuned/copse", "han/copse", "copy", "a+=b", "copse/copy",
                goal ? " | goal (min, median)" : "");
    int met_min = 0, met_median = 0, judged = 0;
    for (const std::size_t bytes : sizes) {
      const Pooled *c = find(T, bytes, "copse"), *tu = find(T, bytes, "tuned"), *ha = find(T, bytes, "han"),
                   *cp = find(T, bytes, "copy"), *ad = find(T, bytes, "add");
      std::string goal_text;
      if (goal && c && (tu || ha)) {
        // The stronger Open MPI configuration at this size, judged separately by min and by median.
        const double need = bytes >= (16u << 10) ? 1.5 : 1.0;
        auto best = [&](double (*stat)(std::vector<double>)) {
          double b = 1e300;
          for (const Pooled* m : {tu, ha})
            if (m) b = std::min(b, stat(m->times));
          return b;
        };
        const bool by_min = best(min_of) / min_of(c->times) >= need;
        const bool by_median = best(median_of) / median_of(c->times) >= need;
        ++judged;
        met_min += by_min;
        met_median += by_median;
        goal_text = std::string(" | ") + (need > 1 ? ">=1.5x " : ">=1x   ") + (by_min ? "met " : "MISS") + "  " +
                    (by_median ? "met " : "MISS");
      }
      std::printf("%9s | %s | %s | %s | %s | %s | %s | %s | %s%s\n", human(bytes).c_str(), pair(c).c_str(),
                  pair(tu).c_str(), pair(ha).c_str(), ratios(tu, c).c_str(), ratios(ha, c).c_str(),
                  cp ? us(min_of(cp->times)).c_str() : "        -", ad ? us(min_of(ad->times)).c_str() : "        -",
                  ratios(c, cp).c_str(), goal_text.c_str());
    }
    if (goal && judged)
      std::printf(
          "goal for T = 2 (copse >= Open MPI's better configuration at every size, >= 1.5x from 16 KiB):\n"
          "  met at %d of %d sizes by minimum, %d of %d by median\n",
          met_min, judged, met_median, judged);
  }
  std::printf(
      "\ncopy / a+=b: the streaming bound, min time for all T threads to each memcpy / add a float32\n"
      "buffer of that size concurrently: per repetition the slowest thread's time, or with more threads\n"
      "than cores the span from the first thread's start to the last one's end. copse/copy compares\n"
      "copse's min and median with the copy bound's. '!' marks a failed check.\n");
  return all_ok ? 0 : 1;
}

int usage() {
  std::fprintf(stderr,
               "usage: bench_threads_allreduce [--threads 2,4,8] [--quick] [--max-bytes SIZE] [--raw FILE]\n"
               "                               [--barrier copse|std] [--bind auto|none]\n"
               "       bench_threads_allreduce --report FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  MeasureOptions o;
  std::optional<std::string> report;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const bool has_value = a + 1 < argc;
    if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--threads" && has_value) {
      o.threads.clear();
      std::istringstream list(argv[++a]);
      for (std::string t; std::getline(list, t, ',');) {
        const int v = std::atoi(t.c_str());
        if (v < 1) return usage();
        o.threads.push_back(v);
      }
      if (o.threads.empty()) return usage();
    } else if (arg == "--max-bytes" && has_value) {
      o.max_bytes = parse_size(argv[++a]);
      if (o.max_bytes < 8) return usage();
    } else if (arg == "--raw" && has_value) {
      o.raw_path = argv[++a];
    } else if (arg == "--barrier" && has_value) {
      const std::string b = argv[++a];
      if (b != "copse" && b != "std") return usage();
      o.std_barrier = b == "std";
    } else if (arg == "--bind" && has_value) {
      const std::string b = argv[++a];
      if (b != "auto" && b != "none") return usage();
      o.bind = b == "auto";
    } else if (arg == "--report" && has_value) {
      report = argv[++a];
    } else {
      return usage();
    }
  }
  try {
    return report ? run_report(*report) : run_measure(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_threads_allreduce: %s\n", e.what());
    return 1;
  }
}
