#pragma once
// Arrival-time estimates for Proficz's arrival-aware allreduces (SLT, PRR:
// algorithms/builders/slt.cpp, prr.cpp), from the ranks' own progress
// reports (Proficz 2018, §3, Fig. 3 and 4).
//
// A rank's iteration is a computation phase followed by an allreduce. The
// phase begins when the rank's previous collective returns (§3's "beginning
// of processing" event); somewhere in it the rank calls edge(fraction)
// (§3's "edge") after doing that fraction of the phase's work, and the phase
// ends when the rank enters the allreduce (§3's "finish of processing").
//
// Estimate (§3: "estimates the remaining computation time"): at the edge,
// the phase is predicted to last correction x (t_edge - t_begin) / fraction
// -- linear extrapolation of the progress so far -- where `correction` is a
// moving average (exponential, weight ArrivalOptions::smoothing on the newest
// iteration) of how far the extrapolation missed in past iterations:
// actual / extrapolated phase length. For a phase whose work is not linear
// in the reported fraction (the paper's DNN calls edge() before the last
// layer, §6) the correction learns the ratio after a few iterations.
//
// Warm-up: the first ArrivalOptions::warmup allreduces of a communicator run
// the team's default algorithm and only collect (the correction learns).
// Proficz's §3 warm-up is a related but different thing: the monitoring
// thread sends a series of messages "in the foreseen directions of
// communication" so that connections exist before the collective. copse's
// links need no connection set-up (shared memory; MPI point-to-point pairs
// that the exchange below, and earlier collectives, have already used), so
// the warm-up here is the paper's other implicit need: predictions only
// after the estimator has seen a few iterations.
//
// Agreement (every rank must plan the same schedule): each rank publishes
// exactly one value per allreduce -- its prediction at its first edge() of
// the phase, or, without an edge, its actual arrival when it enters the
// allreduce -- and the allreduce is planned once all p values of that call
// are in. A value is never revised after publication, so every rank plans
// from the same vector; waiting for it costs nothing extra as long as every
// rank's edge comes before the earliest rank's arrival, and at worst makes
// the early ranks wait for the late rank's edge, which still comes before its
// arrival (the pre-reduction then has the rest of its phase). How the values
// travel is the communicator's: ArrivalBoard below for thread ranks, point-to-
// point messages for MPI ranks (runtime/mpi_comm.cpp).
//
// Plans: the agreed vector is compressed into an ArrivalKey (order and gaps
// at a coarse resolution); the schedule is planned from the key's own
// vector, a pure function of the key, so plans can be cached per key with
// any eviction policy and every rank still plans the same schedule.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "common/cost_model.hpp"

namespace copse {

struct ArrivalOptions {
  int warmup = 3;          // allreduces that run the default algorithm and only collect
  double smoothing = 0.5;  // weight of the newest iteration in the correction, in (0, 1]
  std::size_t plans = 8;   // arrival-keyed plans kept per shape (least recently used go first)
  // Predicted gaps below this count as simultaneous arrival: jitter of a few
  // microseconds neither reorders the ranks nor costs a new plan.
  Picos resolution = 50'000'000;  // 50 us
};
void check_arrival_options(const ArrivalOptions& options);  // UsageError for a value out of range

// One rank's estimator: pure arithmetic on the times it is given (any clock,
// in picoseconds), no clock of its own.
class ArrivalEstimator {
 public:
  explicit ArrivalEstimator(double smoothing = 0.5) : smoothing_(smoothing) {}
  void begin(Picos now);  // a computation phase begins
  // The rank has done `fraction` (in (0, 1], else UsageError) of the phase.
  // Returns true for the phase's first edge (the one whose prediction counts).
  bool edge(Picos now, double fraction);
  bool has_edge() const { return edge_fraction_ > 0; }
  // This phase's predicted end (arrival) from its first edge; without an
  // edge, the phase's begin.
  Picos predicted() const;
  // The phase ended (the rank entered the allreduce): the correction learns
  // from it if the phase had an edge.
  void arrive(Picos now);
  double correction() const { return correction_; }
  Picos phase_begin() const { return begin_; }

 private:
  double smoothing_;
  double correction_ = 1.0;
  bool learned_ = false;  // the correction has seen an iteration
  Picos begin_ = 0;
  Picos edge_time_ = 0;
  double edge_fraction_ = 0;  // 0: no edge in this phase
};

// The agreed predictions, compressed: each rank's gap after the earliest in
// kLevels steps of the largest gap, and the largest gap to a quarter of an
// octave; gaps below `resolution` are 0 (and a largest gap below it makes
// every gap 0). Equal keys give equal plans; a steady pattern keeps its key
// through the jitter of real runs.
struct ArrivalKey {
  static constexpr int kLevels = 16;
  std::vector<std::int32_t> level;  // per rank, 0..kLevels
  std::int32_t scale = -1;          // round(4 log2(largest gap in ps)); -1: all arrive together
  bool operator==(const ArrivalKey&) const = default;
};
ArrivalKey arrival_key(const std::vector<Picos>& predicted, Picos resolution = 0);
void arrival_key(const std::vector<Picos>& predicted, Picos resolution, ArrivalKey& out);  // reuses out's memory
// The vector a key stands for (earliest at 0): what the schedule is planned from.
std::vector<Picos> arrival_of(const ArrivalKey& key);

// Per-rank bookkeeping both communicators share: the estimator, the count of
// allreduces, the warm-up, and when to publish. Times are the caller's clock.
class ArrivalMonitor {
 public:
  ArrivalMonitor() = default;
  ArrivalMonitor(const ArrivalOptions& options, bool aware) : options_(options), aware_(aware) {
    estimator_ = ArrivalEstimator(options.smoothing);
  }
  // The allreduce this phase leads to (0 for the first).
  std::int64_t call() const { return calls_; }
  // Whether allreduce `call` is planned from agreed predictions (the
  // algorithm is arrival-aware and the warm-up is over).
  bool planned_by_arrival(std::int64_t call) const { return aware_ && call >= options_.warmup; }
  // edge(): the value to publish for call(), if this is the phase's first
  // edge and the call is planned by arrival.
  std::optional<Picos> edge(Picos now, double fraction);
  // Entering an allreduce: the value to publish if none was (the arrival
  // itself); learns; the phase is over. call() still names this allreduce
  // until returned() is called.
  std::optional<Picos> arrive(Picos now);
  // Any collective returned: a new phase begins (after an allreduce, the
  // next call is counted).
  void returned(Picos now, bool was_allreduce);
  const ArrivalEstimator& estimator() const { return estimator_; }
  const ArrivalOptions& options() const { return options_; }

 private:
  ArrivalOptions options_;
  bool aware_ = false;
  ArrivalEstimator estimator_;
  std::int64_t calls_ = 0;
  bool published_ = false;  // for call()
  bool in_allreduce_ = false;
};

// The thread communicator's exchange: p slots per call, two calls deep. A
// rank publishes for call k+1 only after returning from call k; it could
// return only once every rank had entered call k past its agreement, so
// every rank is done reading call k-1's slots, which call k+1 reuses.
class ArrivalBoard {
 public:
  explicit ArrivalBoard(int ranks);
  void publish(int rank, std::int64_t call, Picos value);
  // Every rank's value for `call`, once all are in. `check` runs every few
  // milliseconds while waiting (it throws to give up: the team aborted, or a
  // deadline passed).
  void wait(std::int64_t call, std::vector<Picos>& out, const std::function<void()>& check);
  // The ranks whose value for `call` is not in yet (for wait reports).
  std::vector<int> missing(std::int64_t call);

 private:
  struct Round {
    std::int64_t call = -1;
    int count = 0;
    std::vector<Picos> value;
    std::vector<char> in;  // per rank: published
  };
  Round& round_of(std::int64_t call) { return rounds_[static_cast<std::size_t>(call % 2)]; }
  int ranks_;
  std::mutex mutex_;
  std::condition_variable changed_;
  Round rounds_[2];
};

}  // namespace copse
