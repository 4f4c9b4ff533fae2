#pragma once
// Replaying an application (`copse replay`): the collective calls an MPI
// program made, as libcopse_mpi.so recorded them (mpi.trace; the format is in
// mpi/trace.hpp), costed on the simulator for another cluster shape and
// algorithm choice. The question it answers: "what would my application's
// collectives cost on 64 nodes with dual-root instead of ring?"
//
// The rules (README, "Replaying an application"):
//  - The calls. Every traced process must have made the same sequence of
//    collectives (the SPMD pattern: call i is the same collective, on a
//    communicator of the same size, with the same bytes, on every process);
//    the trace says each call's size, and replay keeps it: a call of n bytes
//    per process stays n bytes per process on the new cluster (allgather: each
//    process's block; reduce_scatter: the whole input, cut into blocks for the
//    new communicator size).
//  - The ranks. The new cluster has P = nodes x ranks-per-node ranks; rank r
//    plays traced process r mod W (W traced processes): its computation
//    between calls is that process's recorded gaps, times compute_scale.
//  - The communicators. A call on all W processes runs on all P ranks. A call
//    on a communicator of s < W processes runs on groups of g = round(s P / W)
//    consecutive ranks (at least 1), all groups at once, each its own
//    collective: ranks are numbered node by node, so a group keeps the node
//    layout of its range. Roots are taken modulo g.
//  - Time. Every rank has a clock. For call i, rank r arrives at its clock plus
//    its gap; each group's collective is simulated with those arrivals as its
//    ranks' start offsets (SimulationOptions::start); each rank's clock moves
//    to its finish. The algorithm, and its block count (autotuned for balanced
//    arrival per shape, or fixed), are the same for every call of a shape.
//    Calls the MPI library served in the traced run are costed as if copse
//    served them; the operator is not looked at (replay moves no data).
//  - Results per call site (site, collective, bytes, communicator size): the
//    calls, the time inside them (per call the mean over ranks of finish -
//    arrival, waiting for late ranks included; summed), the part after the
//    last arrival (Proficz's measure, summed), and the traced duration (per call
//    the mean over traced processes, summed) for comparison; in total, the
//    same sums and the predicted end: the slowest rank's clock after its last
//    call.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/cost_model.hpp"
#include "common/schedule.hpp"
#include "tools/experiment.hpp"

namespace copse {

// One line of a trace file.
struct TraceCall {
  int rank = 0;  // in the traced MPI_COMM_WORLD
  int size = 1;
  long long call = 0;
  std::string collective;  // MPI's name: allreduce, ..., reduce_scatter_block, reduce_scatter
  int comm_size = 1;
  std::uint64_t count = 0;
  std::uint64_t type_size = 0;
  std::string op;
  int root = -1;
  bool served = false;
  std::string site = "?";
  double t = 0, gap = 0, duration = 0;  // seconds
  int line = 0;                         // in the file, from 1
  std::uint64_t bytes() const { return count * type_size; }
};

struct Trace {
  std::string path;
  int processes = 0;                          // W
  std::vector<std::vector<TraceCall>> calls;  // [rank][call]
  std::size_t sequence_length() const { return calls.empty() ? 0 : calls.front().size(); }
};

// Reads and checks a trace file (lines in any order). UsageError naming
// PATH:LINE for a line that is not one of mpi/trace.hpp's; naming the file for
// a missing process or call, or processes whose sequences differ (with both
// lines).
Trace read_trace(const std::string& path);

struct ReplayOptions {
  // The cluster: its node sizes, cost model and hierarchy (arrival and
  // repetitions are not used).
  ClusterSpec cluster;
  // The algorithm per copse collective (registry names); a collective not
  // here uses team_defaults (runtime/comm.hpp).
  std::map<Collective, std::string> algorithms;
  std::optional<int> blocks;  // nullopt: per shape, the count minimising simulated time (balanced arrival)
  double compute_scale = 1;   // gaps are multiplied by this
};

struct ReplaySite {
  std::string site;
  std::string collective;  // MPI's name
  std::uint64_t bytes = 0;
  int comm_size = 0;  // traced
  int group = 0;      // ranks per collective on the new cluster
  std::string algorithm;
  int blocks = 1;
  long long calls = 0;
  Picos time = 0;        // sum over calls of the mean time inside the call
  Picos after_last = 0;  // sum over calls of (last finish - last arrival)
  double traced = 0;     // seconds: sum over calls of the traced mean duration
};

struct ReplayResult {
  int ranks = 0;      // P
  int processes = 0;  // W
  long long calls = 0;
  std::vector<ReplaySite> sites;  // in order of first call
  Picos time = 0;                 // sum of the sites' time
  Picos after_last = 0;
  Picos compute = 0;      // mean over ranks of the summed (scaled) gaps
  Picos end = 0;          // the slowest rank's clock after its last call
  double traced = 0;      // seconds: sum of the sites' traced
  double traced_end = 0;  // seconds: the latest end of a traced call
};

ReplayResult replay(const Trace& trace, const ReplayOptions& options);

// The copse collective an MPI collective's name replays as (UsageError for another name).
Collective replay_collective(const std::string& mpi_collective);

}  // namespace copse
