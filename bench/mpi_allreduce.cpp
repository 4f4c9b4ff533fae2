// Open MPI's MPI_Allreduce, measured the way bench_threads_allreduce measures
// copse: the reference side of scripts/bench-vs-mpi.sh. A plain MPI program,
// not part of the copse library (it links only MPI).
//
// Method (mpicroscope): for each size, a few untimed warm-up calls, one
// verified call, then `reps` repetitions of { MPI_Barrier; t0; MPI_Allreduce;
// t1 }. Each rank keeps its own t1 - t0; after the loop the per-repetition
// maximum over ranks (the slowest rank) is gathered at rank 0, which reports
// min and median over repetitions and appends the raw per-repetition times to
// the --raw file for the combined report. The result is checked against the
// exact expected sum after the first call and after the last repetition.
//
// Data: float32 sum. Rank r's element i is (r + 1) * (i % 8 + 1), so the sum
// is T(T+1)/2 * (i % 8 + 1): small integers, exact in float.
//
// The sizes and repetition counts must match bench_threads_allreduce.cpp's
// (same rule, duplicated because the two programs share no code).
//
// Usage: mpirun -np T [mca options] mpi_allreduce [--label NAME] [--raw FILE]
//                                                [--quick] [--max-bytes SIZE]
// Exit status: 0 when every size verified, 1 on a wrong result, 2 on bad usage.
// Only MPI's C interface is used; Open MPI's deprecated C++ bindings header
// does not compile cleanly under -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

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

// Index of the first wrong element, or -1.
long long first_wrong(const float* recv, std::size_t count, int ranks) {
  for (std::size_t i = 0; i < count; ++i)
    if (recv[i] != expected(ranks, i)) return static_cast<long long>(i);
  return -1;
}

std::size_t parse_size(const char* text) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  std::string unit(end);
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

void* page_aligned(std::size_t bytes) {
  const std::size_t rounded = (bytes + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, rounded);
  if (!p) {
    std::fprintf(stderr, "mpi_allreduce: cannot allocate %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::memset(p, 0, rounded);  // first touch by this process
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);

  std::string label = "mpi", raw_path;
  bool quick = false;
  std::size_t max_bytes = 64u << 20;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--label" && a + 1 < argc) {
      label = argv[++a];
    } else if (arg == "--raw" && a + 1 < argc) {
      raw_path = argv[++a];
    } else if (arg == "--max-bytes" && a + 1 < argc) {
      max_bytes = parse_size(argv[++a]);
      if (max_bytes < 8) {
        if (rank == 0) std::fprintf(stderr, "mpi_allreduce: bad --max-bytes '%s'\n", argv[a]);
        MPI_Finalize();
        return 2;
      }
    } else {
      if (rank == 0)
        std::fprintf(stderr,
                     "usage: mpirun -np T mpi_allreduce [--label NAME] [--raw FILE] [--quick] [--max-bytes SIZE]\n");
      MPI_Finalize();
      return 2;
    }
  }

  const std::vector<std::size_t> sizes = bench_sizes(quick, max_bytes);
  const std::size_t largest = sizes.empty() ? 8 : sizes.back();
  auto* send = static_cast<float*>(page_aligned(largest));
  auto* recv = static_cast<float*>(page_aligned(largest));
  for (std::size_t i = 0; i < largest / sizeof(float); ++i) send[i] = input(rank, i);

  std::FILE* raw = nullptr;
  if (rank == 0 && !raw_path.empty()) {
    raw = std::fopen(raw_path.c_str(), "a");
    if (!raw) {
      std::fprintf(stderr, "mpi_allreduce: cannot open %s\n", raw_path.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (rank == 0) {
    std::printf("MPI_Allreduce [%s], %d processes, float32 sum; times in us, slowest rank per repetition\n",
                label.c_str(), ranks);
    std::printf("%10s %6s %12s %12s  %s\n", "size", "reps", "min", "median", "check");
    std::fflush(stdout);
  }

  bool all_ok = true;
  for (const std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    const int reps = bench_reps(quick, bytes);
    std::vector<double> mine(static_cast<std::size_t>(reps)), slowest(static_cast<std::size_t>(reps));

    // Verified call: poison the result first so a call that writes nothing fails.
    std::fill(recv, recv + count, -1.0f);
    MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long long wrong = first_wrong(recv, count, ranks);
    float wrong_value = wrong < 0 ? 0.0f : recv[wrong];
    for (int w = 0; w < kWarmup; ++w)
      MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      const auto t1 = std::chrono::steady_clock::now();
      mine[static_cast<std::size_t>(r)] = std::chrono::duration<double>(t1 - t0).count();
    }
    if (wrong < 0) {
      wrong = first_wrong(recv, count, ranks);
      if (wrong >= 0) wrong_value = recv[wrong];
    }

    MPI_Reduce(mine.data(), slowest.data(), reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int ok = wrong < 0 ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!ok)
      std::fprintf(stderr, "mpi_allreduce [%s]: rank %d, %s: element %lld is %g, expected %g\n", label.c_str(), rank,
                   human(bytes).c_str(), wrong, static_cast<double>(wrong_value),
                   static_cast<double>(expected(ranks, static_cast<std::size_t>(wrong))));
    all_ok = all_ok && all;

    if (rank == 0) {
      std::vector<double> sorted = slowest;
      std::sort(sorted.begin(), sorted.end());
      std::printf("%10s %6d %12.2f %12.2f  %s\n", human(bytes).c_str(), reps, sorted.front() * 1e6,
                  sorted[sorted.size() / 2] * 1e6, all ? "ok" : "WRONG");
      std::fflush(stdout);
      if (raw) {
        std::fprintf(raw, "%s\t%d\t%zu\t%s\t", label.c_str(), ranks, bytes, all ? "ok" : "FAIL");
        for (std::size_t r = 0; r < slowest.size(); ++r) std::fprintf(raw, r ? ",%.9g" : "%.9g", slowest[r]);
        std::fprintf(raw, "\n");
        std::fflush(raw);
      }
    }
  }
  if (raw) std::fclose(raw);
  std::free(send);
  std::free(recv);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
