#pragma once
// Bjørndalen et al.'s 8-way cluster (`copse study bjorndalen`,
// bench/study_bjorndalen.cpp): 4 nodes x 8 ranks, allreduce of one int32 as
// reduce then broadcast, on the emulator (verified, virtual times equal to
// the simulator's), under two models:
//   LogGP: per-message overhead o at both ends, wire latencies that overlap
//     across concurrent messages, and one shared 100 Mbit/s interface per
//     node (80 ns/B, one rail) -- the paper's Fast Ethernet;
//   Hockney: a message holds both ports for alpha + beta*n, with the same o
//     charged as a receive overhead.
// The paper's configurations: LAM's default binomial tree over all 32 ranks;
// one local root per node with seven children; two groups of four per node,
// every group leader straight to the root (multi-leader); groups of two with
// extra levels. Then a sweep of o and the intra/inter latency ratio shows
// where, in each model, the paper's ordering holds.

#include <filesystem>
#include <string>
#include <vector>

#include "common/cost_model.hpp"
#include "common/progress.hpp"
#include "tools/study_support.hpp"

namespace copse {

struct BjorndalenScheme {
  const char* label;
  const char* grouping;  // nullptr: no hierarchy
  bool multi_leader;
  double paper_us;  // the paper's 8W figure
};
// LAM default, 7 children, groups of 4 ML, groups of 2: the paper's order of rows.
const std::vector<BjorndalenScheme>& bjorndalen_schemes();

struct BjorndalenStudyOptions {
  double intra_latency = 37.5e-6;  // seconds
  double inter_latency = 150e-6;
  double overhead = 10e-6;
  // The sweep: o (seconds) by rows, intra-node latency as a fraction of inter-node by columns; empty: no sweep.
  std::vector<double> sweep_overheads = {0, 10e-6, 40e-6, 100e-6, 200e-6};
  std::vector<double> sweep_fractions = {0.02, 0.1, 0.25, 0.5, 1.0};
};
// The model of the study under `timing` (loggp or hockney).
CostModel bjorndalen_model(double intra_latency, double inter_latency, double overhead, Timing timing);

struct BjorndalenRow {
  Timing timing = Timing::loggp;
  std::size_t scheme = 0;  // into bjorndalen_schemes()
  Picos simulated = 0, emulated = 0;
  bool verified = false;
  bool ok() const { return verified && emulated == simulated; }
};
struct BjorndalenSweep {
  Timing timing = Timing::loggp;
  // Per cell (row-major: overheads by fractions), the three hierarchical
  // schemes fastest first: "4" groups of 4 ML, "7" seven children, "2"
  // groups of 2; "472" is the paper's order.
  std::vector<std::string> orders;
  int paper_cells() const;
};
struct BjorndalenStudy {
  BjorndalenStudyOptions options;
  std::vector<BjorndalenRow> rows;      // LogGP's four, then Hockney's
  std::vector<BjorndalenSweep> sweeps;  // LogGP, Hockney (none without a sweep)
  bool ok() const;
};
// UsageError for a negative latency or overhead, or a fraction not in (0, 1].
BjorndalenStudy run_bjorndalen_study(const BjorndalenStudyOptions& options, const ProgressCallback& progress = {});

// The two tables (paper beside each model) and the sweeps, as text.
std::string bjorndalen_tables(const BjorndalenStudy& study);
// dir/bjorndalen.dat, dir/bjorndalen.gp and, with gnuplot, dir/bjorndalen.svg.
StudyPlot write_bjorndalen_plot(const std::filesystem::path& dir, const BjorndalenStudy& study);

}  // namespace copse
