// A plain MPI benchmark of six collectives -- MPI_Allreduce, MPI_Reduce,
// MPI_Bcast, MPI_Barrier, MPI_Allgather, MPI_Reduce_scatter_block -- and the
// report that puts several runs of it side by side. It uses no copse header and
// links only MPI: to copse it is an unmodified MPI program, so
// scripts/bench-mpi.sh runs it twice, on Open MPI alone and with
// LD_PRELOAD=libcopse_mpi.so, and compares.
//
// Forms (--forms): each call blocking (the default), nonblocking
// (MPI_I<collective> then MPI_Wait, timed together) or persistent (made
// once per collective, root and size with MPIX_<Collective>_init, then
// MPI_Start and MPI_Wait timed per call; where the library has no persistent
// collectives, rank 0 says so and that form is left out), by the same method.
//
// Method (Träff's mpicroscope): for each collective, root and size, one
// verified call, two untimed warm-up calls, then `reps` repetitions of
// { MPI_Barrier; t0; call; t1 }, then a second verified call (--sync p2p: a
// line-up of point-to-point messages instead of MPI_Barrier, see
// mpi_collectives_forms.hpp). With --native, further sides in the same run:
// the same calls through the MPI library's own PMPI_ names, each side
// verified and warmed up alike and the timed repetitions interleaved, side
// after side (under LD_PRELOAD=libcopse_mpi.so: copse and Open MPI in the
// same processes, so a launch's placement and pages weigh on both). Each rank keeps
// its own t1 - t0; per repetition the slowest rank's time counts (the
// collective is done when its last rank is), and min and median over
// repetitions are reported. `reps` fills about half a second at the slowest
// rank's warm-up pace, within [10, 1000]. The per-rank times and verdicts
// reach rank 0 over point-to-point messages, never through a collective: under
// LD_PRELOAD the library being measured must not also time and judge itself.
//
// Data: float32, sum where an operator applies. Rank r's element i is
// (r + 1) * (i % 8 + 1) + i % 251, integers whose sums stay exact in float for
// any order of addition (up to about 2000 ranks), so every result is compared
// for equality with a sequential expectation. i % 251 makes neighbouring blocks
// of every power-of-two size differ, so a block that lands in the wrong place
// is caught. The verified calls run on an output poisoned with -1 (no correct
// value is negative), so a call that writes nothing fails. MPI_Barrier has no
// output; its check is causal: the last rank waits 20 ms before entering, the
// others each send it a message as soon as they leave, and it must receive
// none before it enters.
//
// Sizes are per rank and per call, as IMB and the OSU benchmarks count them:
// the vector for allreduce and reduce, the buffer for bcast, each rank's block
// for allgather (it receives np blocks), scatter, gather and alltoall (each
// rank sends np to the others), and for reduce_scatter_block and
// reduce_scatter (equal counts) the vector each rank sends, cut into np blocks (rounded down to whole floats, at
// least one). 8 B and 16 B .. 64 MiB in powers of 4; barrier once, as 0 B.
//
// Output: rank 0 prints a table per collective and root as it goes, and with
// --json FILE appends one JSON object per line per (collective, root, size):
//   {"config", "label", "collective", "form", "sync", "root" (null if unrooted), "np", "bytes",
//    "count", "reps", "warmup", "verified", "failure", "min", "median",
//    "times" (seconds, the slowest rank per repetition)}
// and, for a --native side, "beside": the label of the run's own side, the
// one its calls were interleaved with.
//
// Report mode (--report FILE..., no mpirun): pools the JSON lines of several
// runs (rounds of the same config, label, collective, root and size: min and
// median over all their repetitions) and prints per config and collective one
// row per size with every label's min and median and the ratio
// baseline/label (above 1: the label is faster than the baseline; against
// the baseline's runs beside that label where there are such); --csv FILE
// writes the same figures, one row per label.
//
// Usage:
//   mpirun -np P [...] mpi_collectives [--collectives LIST] [--forms LIST] [--roots LIST] [--sizes LIST]
//                                      [--min-size SIZE] [--quick] [--label NAME] [--native LABELS]
//                                      [--config NAME] [--json FILE]
//   mpi_collectives --report FILE... [--baseline LABEL] [--csv FILE] [--stats FILE...]
// Exit status: 0 when every result verified, 1 on a wrong result (in report
// mode: a line that recorded one), 2 on bad usage.
//
// Only MPI's C interface is used; Open MPI's deprecated C++ bindings header
// does not compile cleanly under -Wextra -Werror.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "mpi_collectives.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "mpi_collectives_forms.hpp"
#include "mpi_collectives_options.hpp"

namespace mpi_collectives {

namespace {

// ---- sizes, repetitions, data ------------------------------------------------

// Untimed calls after the first verified one.
constexpr int kWarmup = 2;

// Timed repetitions: as many as fit in half a second (quick: 50 ms) at the
// slowest rank's warm-up pace, between 10 and 1000 (quick: 5 and 100). A
// budget in time, not in bytes, because oversubscribed runs are slower by
// orders of magnitude than their byte counts say.
int repetitions(bool quick, double seconds_per_call) {
  const double budget = quick ? 0.05 : 0.5;
  const double lo = quick ? 5 : 10, hi = quick ? 100 : 1000;
  return static_cast<int>(std::clamp(budget / std::max(seconds_per_call, 1e-9), lo, hi));
}

// The count passed to MPI for `bytes` per rank: the vector (allreduce,
// reduce), the buffer (bcast), each rank's block (allgather), or, for
// reduce_scatter_block and reduce_scatter (every rank's count equal), each
// rank's block of a `bytes` vector cut into np (rounded down, at least one
// element), as IMB and the OSU benchmarks count it.
std::size_t count_for(const Collective& c, std::size_t bytes, int ranks) {
  const std::size_t elements = bytes / sizeof(float);
  if (!c.scatters_reduction()) return elements;
  return std::max<std::size_t>(1, elements / static_cast<std::size_t>(ranks));
}

float input(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 8 + 1) + static_cast<int>(i % 251));
}

float sum_of_inputs(int ranks, std::size_t i) {
  return static_cast<float>(ranks * (ranks + 1) / 2 * static_cast<int>(i % 8 + 1) + ranks * static_cast<int>(i % 251));
}

// ---- measure mode --------------------------------------------------------------

// Page-aligned, first touched by this process, freed with it.
struct Buffer {
  float* data = nullptr;
  explicit Buffer(std::size_t bytes) {
    const std::size_t rounded = std::max<std::size_t>((bytes + 4095) / 4096 * 4096, 4096);
    data = static_cast<float*>(std::aligned_alloc(4096, rounded));
    if (!data) {
      std::fprintf(stderr, "mpi_collectives: cannot allocate %zu bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::memset(data, 0, rounded);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// One measured case: a collective, its root (0 when unrooted), the size per
// rank, the count passed to MPI, and the form it is called in.
struct Case {
  const Collective* c;
  int root;
  std::size_t bytes, count;
  Form form = Form::blocking;
};

// One side of a case: the label its lines carry, the entry its calls go
// through -- the run's own (--label, MPI_) and each --native one (PMPI_) --
// and its persistent request, between Runner::prepare and Runner::release.
struct Side {
  std::string label;
  Entry entry;
  MPI_Request persistent = MPI_REQUEST_NULL;
};

class Runner {
 public:
  Runner(int rank, int ranks) : rank_(rank), ranks_(ranks), recv_counts_(static_cast<std::size_t>(ranks)) {}

  // Buffers for every size up to `largest_count` elements of this collective.
  void allocate(const Collective& c, std::size_t largest_count) {
    const std::size_t send_count = c.blocks(true, ranks_) * largest_count;
    const std::size_t recv_count = c.blocks(false, ranks_) * largest_count;
    send_.reset();
    recv_.reset();
    send_.emplace(send_count * sizeof(float));
    recv_.emplace(recv_count * sizeof(float));
    for (std::size_t i = 0; i < send_count; ++i) send_->data[i] = input(rank_, i);
  }

  // Before a case's first call through `e`: MPI_Reduce_scatter's counts
  // and the persistent request, made once.
  void prepare(const Case& k, Side& side) {
    std::fill(recv_counts_.begin(), recv_counts_.end(), static_cast<int>(k.count));
    if (k.form != Form::persistent) return;
    if (init_persistent(side.entry, buffers(k), &side.persistent) != MPI_SUCCESS) {
      std::fprintf(stderr, "mpi_collectives: the persistent %s could not be made\n", k.c->name);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  // After its last call.
  void release(Side& side) {
    if (side.persistent != MPI_REQUEST_NULL) request_free(side.entry, &side.persistent);
  }

  void call(const Case& k, Side& side) {
    const Entry e = side.entry;
    switch (k.form) {
      case Form::blocking: call_blocking(e, buffers(k)); return;
      case Form::nonblocking: {
        MPI_Request request = MPI_REQUEST_NULL;
        start_nonblocking(e, buffers(k), &request);
        wait(e, &request);
        return;
      }
      case Form::persistent:
        start(e, &side.persistent);
        wait(e, &side.persistent);
        return;
    }
  }

  // One call on a poisoned output, then this rank's result compared with the
  // sequential expectation. Returns "" or what is wrong.
  std::string verified_call(const Case& k, Side& side, const char* when) {
    const Id id = k.c->id;
    if (id == Id::barrier) return barrier_check(k, side, when);
    const std::size_t out = k.c->blocks(false, ranks_) * k.count;
    const bool has_output = (id != Id::reduce && id != Id::gather) || rank_ == k.root;
    float* recv = recv_->data;
    if (id == Id::bcast && rank_ == k.root)
      for (std::size_t i = 0; i < out; ++i) recv[i] = input(k.root, i);
    else
      std::fill(recv, recv + out, -1.0f);
    call(k, side);
    if (!has_output) return "";
    for (std::size_t i = 0; i < out; ++i) {
      float want = 0;
      switch (id) {
        case Id::allreduce:
        case Id::reduce: want = sum_of_inputs(ranks_, i); break;
        case Id::bcast: want = input(k.root, i); break;
        case Id::allgather: want = input(static_cast<int>(i / k.count), i % k.count); break;
        case Id::reduce_scatter_block:
        case Id::reduce_scatter: want = sum_of_inputs(ranks_, static_cast<std::size_t>(rank_) * k.count + i); break;
        case Id::scatter: want = input(k.root, static_cast<std::size_t>(rank_) * k.count + i); break;
        case Id::gather: want = input(static_cast<int>(i / k.count), i % k.count); break;
        case Id::alltoall:  // block s of the receive buffer: rank s's block for this rank
          want = input(static_cast<int>(i / k.count), static_cast<std::size_t>(rank_) * k.count + i % k.count);
          break;
        case Id::barrier: break;
      }
      if (recv[i] != want) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "rank %d, %s %s, %s: element %zu is %g, expected %g", rank_, k.c->name,
                      human(k.bytes).c_str(), when, i, static_cast<double>(recv[i]), static_cast<double>(want));
        return buf;
      }
    }
    return "";
  }

  // Times `reps` calls of each side, interleaved: repetition r calls sides
  // r, r + 1, ... (mod their number) in turn, so that each side goes first
  // as often as the others and meets the same moments of the machine.
  // Returns this rank's time of each call, per side.
  std::vector<std::vector<double>> timed(const Case& k, std::vector<Side>& sides, int reps, Sync sync) {
    const std::size_t n = sides.size();
    std::vector<std::vector<double>> mine(n, std::vector<double>(static_cast<std::size_t>(reps)));
    for (std::size_t r = 0; r < static_cast<std::size_t>(reps); ++r)
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t side = (r + j) % n;
        line_up(sync, rank_, ranks_);
        const double t0 = MPI_Wtime();
        call(k, sides[side]);
        mine[side][r] = MPI_Wtime() - t0;
      }
    return mine;
  }

 private:
  // The barrier's causal check: nobody may leave before the last rank has
  // entered. The last rank waits, probing for the "left" messages the
  // others send on leaving; a barrier that does not wait lets them arrive
  // during the wait.
  std::string barrier_check(const Case& k, Side& side, const char* when) {
    constexpr int kLeftTag = 7101;
    const int last = ranks_ - 1;
    if (ranks_ == 1) {
      call(k, side);
      return "";
    }
    std::string wrong;
    int token = rank_;
    if (rank_ == last) {
      // Probing all along keeps MPI progressing, so that an early message is seen.
      int early = 0;
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
      while (!early && std::chrono::steady_clock::now() < until)
        MPI_Iprobe(MPI_ANY_SOURCE, kLeftTag, MPI_COMM_WORLD, &early, MPI_STATUS_IGNORE);
      call(k, side);
      if (early) wrong = std::string("barrier, ") + when + ": a rank left before the last rank entered";
      for (int q = 0; q < last; ++q) MPI_Recv(&token, 1, MPI_INT, q, kLeftTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      call(k, side);
      MPI_Send(&token, 1, MPI_INT, last, kLeftTag, MPI_COMM_WORLD);
    }
    return wrong;
  }

  CallBuffers buffers(const Case& k) {
    return {k.c->id, k.root, static_cast<int>(k.count), send_->data, recv_->data, recv_counts_.data()};
  }

  int rank_, ranks_;
  std::vector<int> recv_counts_;  // MPI_Reduce_scatter's, every one the case's count (set by prepare)
  std::optional<Buffer> send_, recv_;
};

// Rank 0 receives every rank's times and verdict (point to point) and returns
// the slowest rank's time per repetition and the first failure, if any.
std::pair<std::vector<double>, std::string> collect(int rank, int ranks, std::vector<double> mine,
                                                    const std::string& failure) {
  constexpr int kTimesTag = 7102, kFailureTag = 7103;
  const int reps = static_cast<int>(mine.size());
  if (rank != 0) {
    MPI_Send(mine.data(), reps, MPI_DOUBLE, 0, kTimesTag, MPI_COMM_WORLD);
    MPI_Send(failure.data(), static_cast<int>(failure.size()), MPI_CHAR, 0, kFailureTag, MPI_COMM_WORLD);
    return {};
  }
  std::string first = failure;
  std::vector<double> theirs(mine.size());
  for (int q = 1; q < ranks; ++q) {
    MPI_Recv(theirs.data(), reps, MPI_DOUBLE, q, kTimesTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (std::size_t k = 0; k < mine.size(); ++k) mine[k] = std::max(mine[k], theirs[k]);
    MPI_Status status;
    MPI_Probe(q, kFailureTag, MPI_COMM_WORLD, &status);
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(static_cast<std::size_t>(length), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, q, kFailureTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (first.empty()) first = text;
  }
  return {mine, first};
}

// Rank 0 learns the largest of every rank's `value` (point to point) and
// sends decide(largest) back: one decision that every rank follows.
template <typename Decide>
int agree(int rank, int ranks, double value, Decide decide) {
  constexpr int kValueTag = 7104, kDecisionTag = 7105;
  int decision = 0;
  if (rank != 0) {
    MPI_Send(&value, 1, MPI_DOUBLE, 0, kValueTag, MPI_COMM_WORLD);
    MPI_Recv(&decision, 1, MPI_INT, 0, kDecisionTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return decision;
  }
  double largest = value;
  for (int q = 1; q < ranks; ++q) {
    double theirs = 0;
    MPI_Recv(&theirs, 1, MPI_DOUBLE, q, kValueTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    largest = std::max(largest, theirs);
  }
  decision = decide(largest);
  for (int q = 1; q < ranks; ++q) MPI_Send(&decision, 1, MPI_INT, q, kDecisionTag, MPI_COMM_WORLD);
  return decision;
}

std::vector<Side> sides_of(const Options& o) {
  std::vector<Side> sides{{o.label, Entry::mpi}};
  for (const std::string& label : o.native) sides.push_back({label, Entry::pmpi});
  return sides;
}

// Rank 0's row and JSON line for one side of a case.
void report_side(const Options& o, const Case& k, const Side& side, int ranks, int reps, const std::string& config,
                 const std::vector<double>& slowest, const std::string& failure, std::FILE* out) {
  if (!failure.empty()) std::fprintf(stderr, "mpi_collectives [%s]: WRONG: %s\n", side.label.c_str(), failure.c_str());
  std::printf("%10s %6d %s %s  %s%s\n", human(k.bytes).c_str(), reps, us(min_of(slowest), 12).c_str(),
              us(median_of(slowest), 12).c_str(), failure.empty() ? "ok" : "WRONG",
              o.native.empty() ? "" : ("  " + side.label).c_str());
  std::fflush(stdout);
  if (!out) return;
  json line = {{"config", config},
               {"label", side.label},
               {"collective", k.c->name},
               {"form", form_name(k.form)},
               {"sync", sync_name(o.sync)},
               {"root", k.c->rooted ? json(k.root) : json(nullptr)},
               {"np", ranks},
               {"bytes", k.bytes},
               {"count", k.count},
               {"reps", reps},
               {"warmup", kWarmup},
               {"verified", failure.empty()},
               {"failure", failure},
               {"min", min_of(slowest)},
               {"median", median_of(slowest)},
               {"times", slowest}};
  if (side.entry == Entry::pmpi) line["beside"] = o.label;
  std::fprintf(out, "%s\n", line.dump().c_str());
  std::fflush(out);
}

// Measures one case (the method at the top) on every side, their timed
// calls interleaved; rank 0 prints a row per side and appends their JSON
// lines to `out`. Whether every side's results verified.
bool measure_case(const Options& o, Runner& runner, const Case& k, int rank, int ranks, const std::string& config,
                  std::FILE* out) {
  std::vector<Side> sides = sides_of(o);
  std::vector<std::string> failures;
  double slowest_pace = 0;
  for (Side& side : sides) {
    runner.prepare(k, side);
    failures.push_back(runner.verified_call(k, side, "first call"));
    const double w0 = MPI_Wtime();
    for (int w = 0; w < kWarmup; ++w) runner.call(k, side);
    slowest_pace = std::max(slowest_pace, (MPI_Wtime() - w0) / kWarmup);
  }
  const int reps =
      agree(rank, ranks, slowest_pace, [&](double slowest_call) { return repetitions(o.quick, slowest_call); });
  std::vector<std::vector<double>> mine = runner.timed(k, sides, reps, o.sync);
  bool ok = true;
  for (std::size_t i = 0; i < sides.size(); ++i) {
    // Every rank makes the same calls whatever its own verdict, or the ranks would part ways.
    const std::string last_failure = runner.verified_call(k, sides[i], "last call");
    runner.release(sides[i]);
    if (failures[i].empty()) failures[i] = last_failure;
    auto [slowest, first_failure] = collect(rank, ranks, std::move(mine[i]), failures[i]);
    ok = ok && failures[i].empty();
    if (rank != 0) continue;
    ok = ok && first_failure.empty();
    report_side(o, k, sides[i], ranks, reps, config, slowest, first_failure, out);
  }
  return ok;
}

int run_measure(const Options& o, int rank, int ranks) {
  std::FILE* out = nullptr;
  if (rank == 0 && !o.json_path.empty() && !(out = std::fopen(o.json_path.c_str(), "a"))) {
    std::fprintf(stderr, "mpi_collectives: cannot open %s\n", o.json_path.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const std::string config = o.config.empty() ? "np" + std::to_string(ranks) : o.config;
  Runner runner(rank, ranks);
  bool all_ok = true;

  for (const Collective* c : o.collectives) {
    const std::vector<std::size_t> sizes = c->has_data() ? o.sizes : std::vector<std::size_t>{0};
    runner.allocate(*c, count_for(*c, *std::max_element(sizes.begin(), sizes.end()), ranks));

    std::vector<int> roots{0};
    if (c->rooted) {
      roots.clear();
      for (const std::string& r : o.roots) {
        const int root = r == "last" ? ranks - 1 : std::atoi(r.c_str());
        if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
      }
    }
    for (const Form form : o.forms)
      for (const int root : roots) {
        if (rank == 0) {
          std::printf("\n%s%s [%s, %s], np=%d%s%s; times in us, slowest rank per repetition\n", c->function,
                      form == Form::blocking ? "" : (std::string(", ") + form_name(form)).c_str(), o.label.c_str(),
                      config.c_str(), ranks, c->rooted ? (", root " + std::to_string(root)).c_str() : "",
                      c->data_text());
          std::printf("%10s %6s %12s %12s  %s\n", "size", "reps", "min", "median", "check");
          std::fflush(stdout);
        }
        for (const std::size_t bytes : sizes)
          all_ok =
              measure_case(o, runner, {c, root, bytes, count_for(*c, bytes, ranks), form}, rank, ranks, config, out) &&
              all_ok;
      }
  }
  if (out) std::fclose(out);
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace mpi_collectives

int main(int argc, char** argv) {
  using namespace mpi_collectives;
  // Report mode needs no MPI at all.
  for (int a = 1; a < argc; ++a)
    if (std::strcmp(argv[a], "--report") == 0) {
      ReportOptions o;
      if (const std::string error = parse_report(argc, argv, o); !error.empty()) {
        std::fprintf(stderr, "mpi_collectives: %s\n%s", error.c_str(), kUsage);
        return 2;
      }
      return run_report(o);
    }
  for (int a = 1; a < argc; ++a)
    if (std::strcmp(argv[a], "--help") == 0 || std::strcmp(argv[a], "-h") == 0) {
      std::printf("%s", kUsage);
      return 0;
    }

  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  Options o;
  if (const std::string error = parse_measure(argc, argv, o, rank, ranks); !error.empty()) {
    if (rank == 0) std::fprintf(stderr, "mpi_collectives: %s\n%s", error.c_str(), kUsage);
    MPI_Finalize();
    return 2;
  }
  const int status = run_measure(o, rank, ranks);
  MPI_Finalize();
  return status;
}
