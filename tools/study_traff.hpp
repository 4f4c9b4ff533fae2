#pragma once
// Träff 2021's comparison (his Table 2) under the cost model (`copse study
// traff`, part 1 of scripts/bench-traff.sh; part 2 runs bench/traff_compare
// under mpirun): allreduce of MPI_INT sums on `nodes` x `ranks_per_node`
// ranks (his 36 x 8), at each element count:
//   native        what an MPI library would run, which the model cannot know:
//                 the best of recursive-doubling, rabenseifner and ring (named)
//   reduce+bcast  binomial reduce, then binomial bcast (the sum of the two)
//   tree          binary-tree (his User-Allreduce1), with his blocks
//                 (ceil(count / block_elements)) and with the best block count
//   dual          dual-root (User-Allreduce2), the same two block choices
// and tree / dual: his analysis predicts 4/3 for large counts (beta terms
// 4 beta m against 3 beta m); he measured 1.14.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/cost_model.hpp"
#include "common/progress.hpp"
#include "tools/study_support.hpp"

namespace copse {

struct TraffStudyOptions {
  int nodes = 36;
  int ranks_per_node = 8;
  // His Table 2's element counts (MPI_INT: 4 bytes each).
  std::vector<std::uint64_t> counts = {0,       1,       2,       8,       15,      21,     25,     87,
                                       150,     212,     250,     875,     1500,    2125,   2500,   8750,
                                       15000,   21250,   25000,   87500,   150000,  212500, 250000, 875000,
                                       1500000, 2125000, 2500000, 4597152, 6694304, 8388608};
  std::uint64_t block_elements = 16000;  // his block size
  CostModel model;
};
// One implementation at one count: simulated time and block count.
struct TraffTime {
  Picos time = 0;
  int blocks = 1;
};
struct TraffRow {
  std::uint64_t count = 0;
  std::string native_algorithm;  // the best of the three
  TraffTime native, reduce_bcast, tree_paper, dual_paper, tree_auto, dual_auto;
};
struct TraffStudy {
  TraffStudyOptions options;
  std::vector<TraffRow> rows;
  // The beta terms alone: no combine cost (gamma 0), the largest count, best blocks.
  TraffTime tree_gamma0, dual_gamma0;
};
// UsageError for no counts, fewer than 2 ranks, or a block size of 0.
TraffStudy run_traff_study(const TraffStudyOptions& options, const ProgressCallback& progress = {});

// The table (us; tree / dual for both block choices) and the gamma-0 line, as text.
std::string traff_table(const TraffStudy& study);
// dir/traff.dat, dir/traff.gp and, with gnuplot, dir/traff.svg: time per
// count of every implementation, and tree / dual.
StudyPlot write_traff_plot(const std::filesystem::path& dir, const TraffStudy& study);

}  // namespace copse
