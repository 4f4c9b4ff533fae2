// Träff 2021's comparison (his Table 2) under mpirun: per element count, the
// MPI library's native MPI_Allreduce, MPI_Reduce followed by MPI_Bcast,
// copse's pipelined binary tree (binary-tree: reduce then broadcast over one
// post-order tree, his User-Allreduce1) and doubly pipelined dual-root
// (dual-root, his User-Allreduce2), each of the two with his block choice
// (blocks of 16000 MPI_INT elements: ceil(count / 16000) blocks) and with
// copse's `--blocks auto` (the count minimising simulated time), side by side.
//
// Method (mpicroscope, his [6]): per count and implementation one verified
// call, two warm-up calls, then `reps` repetitions of { barrier; t0; call; t1 },
// each rank keeping t1 - t0; per repetition the slowest rank's time counts,
// and min and median over repetitions are reported. The barrier, the
// gathering of times and the native calls are the MPI library's own (PMPI_),
// so the program may be linked with libcopse_mpi.so, which it needs for
// copse's side (copse::mpi::Team, runtime/mpi_comm.hpp) without its interposer
// touching the native side. MPI_INT, MPI_SUM; rank r's element i is
// (r + 1) * (i % 7 + 1), every result checked on every rank (exit 1 if wrong).
//
// copse's Teams take the configuration (COPSE_* variables, copse.toml) as
// libcopse_mpi.so does: COPSE_HIERARCHY_RANKS_PER_NODE=K splits the job into
// virtual nodes of K processes (the algorithm then runs among the node
// leaders, the nodes reducing through shared memory); K = 1 runs the
// algorithms flat over all processes, as in the paper.
//
//   mpirun -np P traff_compare [--counts N,N,...] [--block-elements 16000] [--seconds S] [--json FILE]
//
// Rank 0 prints one row per count: every implementation's min and median in
// microseconds, then binary-tree / dual-root (min) with the paper's blocks and
// with auto: his 4/3 prediction for large counts, 1.14 measured.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/reduce_op.hpp"
#include "config/config.hpp"
#include "mpi/options.hpp"
#include "runtime/mpi_comm.hpp"

namespace {

struct Args {
  std::vector<long> counts = {0, 1, 25, 250, 2500, 25000, 250000, 2500000};
  long block_elements = 16000;
  double seconds = 0.25;  // per count and implementation, about
  std::string json;
};

[[noreturn]] void usage(int rank, const std::string& why) {
  if (rank == 0)
    std::fprintf(stderr,
                 "traff_compare: %s\nusage: mpirun -np P traff_compare [--counts N,N,...] [--block-elements B] "
                 "[--seconds S] [--json FILE]\n",
                 why.c_str());
  PMPI_Finalize();
  std::exit(2);
}

Args parse(int argc, char** argv, int rank) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(rank, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--counts") {
      a.counts.clear();
      std::string text = value();
      for (std::size_t at = 0; at <= text.size();) {
        const auto comma = std::min(text.find(',', at), text.size());
        char* end = nullptr;
        const std::string item = text.substr(at, comma - at);
        const long n = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || n < 0) usage(rank, "bad count \"" + item + "\"");
        a.counts.push_back(n);
        at = comma + 1;
      }
    } else if (arg == "--block-elements") {
      a.block_elements = std::atol(value().c_str());
      if (a.block_elements < 1) usage(rank, "--block-elements must be >= 1");
    } else if (arg == "--seconds") {
      a.seconds = std::atof(value().c_str());
      if (!(a.seconds > 0)) usage(rank, "--seconds must be > 0");
    } else if (arg == "--json") {
      a.json = value();
    } else {
      usage(rank, "unknown argument " + arg);
    }
  }
  return a;
}

struct Timing {
  std::string name;
  int blocks = 0;  // copse's: requested (0: auto)
  bool verified = true;
  double min = 0, median = 0;
  int reps = 0;
};

// One implementation at one count: a verified call (`check` on every rank),
// a warm-up, then as many timed calls as fill about `seconds` at the slowest
// rank's pace (within [5, 500]); min and median of the slowest rank per call.
Timing measure(const std::string& name, int blocks, const std::function<void()>& call,
               const std::function<bool()>& check, double seconds) {
  Timing t{name, blocks};
  call();
  int ok = check() ? 1 : 0, all_ok = 0;
  PMPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  t.verified = all_ok == 1;
  call();
  PMPI_Barrier(MPI_COMM_WORLD);
  double w0 = MPI_Wtime();
  call();
  double one = MPI_Wtime() - w0, slowest = 0;
  PMPI_Allreduce(&one, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const int reps = static_cast<int>(std::clamp(seconds / std::max(slowest, 1e-7), 5.0, 500.0));
  std::vector<double> mine(static_cast<std::size_t>(reps)), worst(static_cast<std::size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    PMPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    call();
    mine[static_cast<std::size_t>(r)] = MPI_Wtime() - t0;
  }
  PMPI_Reduce(mine.data(), worst.data(), reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  std::sort(worst.begin(), worst.end());
  t.reps = reps;
  t.min = worst.front();
  t.median = worst[worst.size() / 2];
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  PMPI_Init(&argc, &argv);
  int rank = 0, np = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &np);
  const Args args = parse(argc, argv, rank);
  int failed = 0;
  try {
    const copse::Config config = copse::Config::load();
    const copse::mpi::CommOptions base = copse::mpi::make_comm_options(config.options());
    const copse::ReduceOp sum = copse::builtin_op("sum", copse::DType::int32);
    const auto team_for = [&](const std::string& algorithm, int blocks) {
      copse::mpi::CommOptions o = base;
      o.allreduce = algorithm;
      o.blocks = blocks;
      return std::make_unique<copse::mpi::Team>(MPI_COMM_WORLD, o, 1);
    };
    // One Team per algorithm with auto blocks, kept; the paper's block counts
    // change with the count, so those Teams are made per count.
    auto tree_auto = team_for("binary-tree", 0), dual_auto = team_for("dual-root", 0);
    std::FILE* json = nullptr;
    if (rank == 0 && !args.json.empty()) json = std::fopen(args.json.c_str(), "a");
    if (rank == 0) {
      std::printf(
          "# Traff 2021 Table 2 on %d processes (virtual nodes of %d; 0: hosts), MPI_INT sum, "
          "paper blocks = ceil(count / %ld); min / median of the slowest rank, us\n",
          np, base.ranks_per_node, args.block_elements);
      std::printf("%10s %17s %17s %17s %17s %17s %17s %11s %11s\n", "count", "MPI_Allreduce", "Reduce+Bcast",
                  "tree(paper)", "dual(paper)", "tree(auto)", "dual(auto)", "tree/dual p", "tree/dual a");
    }
    for (long count : args.counts) {
      const auto n = static_cast<std::size_t>(count);
      std::vector<int> in(n), out(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = (rank + 1) * static_cast<int>(i % 7 + 1);
      const auto check = [&]() {
        for (std::size_t i = 0; i < n; ++i)
          if (out[i] != static_cast<int>(i % 7 + 1) * np * (np + 1) / 2) return false;
        return true;
      };
      const int paper_blocks =
          count == 0 ? 1 : static_cast<int>((count + args.block_elements - 1) / args.block_elements);
      auto tree_paper = team_for("binary-tree", paper_blocks), dual_paper = team_for("dual-root", paper_blocks);
      const auto copse_call = [&](copse::mpi::Team& t) {
        return [&] { t.comm(0).allreduce(in.data(), out.data(), n, sum); };
      };
      struct Impl {
        std::string name;
        int blocks;
        std::function<void()> call;
      };
      const std::vector<Impl> impls = {
          {"MPI_Allreduce", -1,
           [&] { PMPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_INT, MPI_SUM, MPI_COMM_WORLD); }},
          {"MPI_Reduce+MPI_Bcast", -1,
           [&] {
             PMPI_Reduce(in.data(), out.data(), static_cast<int>(count), MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
             PMPI_Bcast(out.data(), static_cast<int>(count), MPI_INT, 0, MPI_COMM_WORLD);
           }},
          {"binary-tree", paper_blocks, copse_call(*tree_paper)},
          {"dual-root", paper_blocks, copse_call(*dual_paper)},
          {"binary-tree", 0, copse_call(*tree_auto)},
          {"dual-root", 0, copse_call(*dual_auto)},
      };
      std::vector<Timing> timings;
      for (const Impl& impl : impls) {
        std::fill(out.begin(), out.end(), -1);  // the verified call must write every element
        timings.push_back(measure(impl.name, impl.blocks, impl.call, check, args.seconds));
        if (!timings.back().verified) failed = 1;
      }
      if (rank == 0) {
        const auto cell = [](const Timing& t) {
          char text[40];
          std::snprintf(text, sizeof text, "%s%.2f/%.2f", t.verified ? "" : "WRONG ", t.min * 1e6, t.median * 1e6);
          return std::string(text);
        };
        std::printf("%10ld", count);
        for (const auto& t : timings) std::printf(" %17s", cell(t).c_str());
        std::printf(" %11.3f %11.3f\n", timings[2].min / timings[3].min, timings[4].min / timings[5].min);
        std::fflush(stdout);
        if (json)
          for (const auto& t : timings)
            std::fprintf(json,
                         "{\"np\": %d, \"ranks_per_node\": %d, \"count\": %ld, \"impl\": \"%s\", \"blocks\": %s, "
                         "\"reps\": %d, \"verified\": %s, \"min\": %.9f, \"median\": %.9f}\n",
                         np, base.ranks_per_node, count, t.name.c_str(),
                         t.blocks < 0    ? "null"
                         : t.blocks == 0 ? "\"auto\""
                                         : std::to_string(t.blocks).c_str(),
                         t.reps, t.verified ? "true" : "false", t.min, t.median);
      }
    }
    if (json) std::fclose(json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "traff_compare: rank %d: %s\n", rank, e.what());
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  PMPI_Finalize();
  return failed;
}
