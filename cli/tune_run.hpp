#pragma once
// `copse tune`'s measurement (config/tune.hpp makes the table from it): the
// unmodified MPI benchmark bench/mpi_collectives run under mpirun twice per
// shape and round -- on the MPI library alone ("tuned") and with
// LD_PRELOAD=libcopse_mpi.so and no decision table, so that copse serves
// every call ("copse") -- the two sides' order rotated from round to round,
// then its report mode pooling the rounds into the CSV the rules read. On a
// shape of several nodes a further copse side per hierarchy form to try
// ("copse-lanes": COPSE_HIERARCHY_FORM=lanes) and per block count to try
// ("copse-b16": COPSE_COLLECTIVES_BLOCKS=16, at the sizes from
// block_counts_from only) joins the rotation. It is
// scripts/bench-mpi.sh's method, without the build and the report's extras.
//
// Files in `work` (created if absent): raw.jsonl (every run's results),
// runs.log (each run's command and output), stats-SHAPE.jsonl (copse's
// stats file: the calls it served and passed on), report.txt (the
// side-by-side report, with those counts) and pooled.csv.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/tune.hpp"

namespace copse {

struct TunePrograms {
  std::vector<std::string> mpirun;  // the launcher and its own leading words: {"mpirun"} or a script
  std::string bench;                // mpi_collectives
  std::string library;              // libcopse_mpi.so
};

// Where an installation puts the library and the benchmark, relative to
// its prefix (GNUInstallDirs' CMAKE_INSTALL_LIBDIR, CMAKE_INSTALL_LIBEXECDIR/copse).
struct TuneInstallDirs {
  std::string lib = "lib", libexec = "libexec/copse";
};

// The programs beside `self` (this executable): in a build tree
// mpi_collectives and libcopse_mpi.so sit next to copse; installed, copse is
// in PREFIX/bin, the others in `installed`'s folders of PREFIX. Empty
// `bench`/`library` arguments are looked up so; `mpirun` (a command line,
// split at spaces) is looked up on PATH. A UsageError names what is missing
// and how to provide it.
TunePrograms locate_tune_programs(const std::string& self, const std::string& mpirun, const std::string& bench,
                                  const std::string& library, const TuneInstallDirs& installed);

struct TuneMeasurement {
  std::vector<TuneShape> shapes;
  std::string sizes;                    // mpi_collectives --sizes LIST; empty: its full sweep
  std::string collectives;              // mpi_collectives --collectives LIST; empty: every one
  std::string forms;                    // mpi_collectives --forms LIST; empty: its default (blocking)
  std::string sync;                     // mpi_collectives --sync barrier|p2p; empty: its default (barrier)
  std::vector<Form> hierarchy_forms;    // copse's further sides on shapes of several nodes
  std::vector<int> block_counts;        // likewise, in the configured form ...
  std::uint64_t block_counts_from = 0;  // ... at the sizes from this many bytes
  int rounds = 2;
  bool paired = false;                     // the library's side timed within copse's runs (above)
  std::vector<std::string> launcher_args;  // given to every mpirun (--host LIST, --hostfile FILE)
  int timeout_seconds = 1800;              // per mpirun
  std::string work;                        // the directory of the files above
};

// Whether `m` measures copse's block counts: some are given, and some size
// is at least block_counts_from.
bool measures_block_counts(const TuneMeasurement& m);

// Runs the measurement; `say` gets one line per run as it ends. Returns the
// pooled CSV's path. A run that fails, times out or verifies wrong is a
// RunFailure naming the log.
std::string measure_for_tune(const TunePrograms& programs, const TuneMeasurement& m,
                             const std::function<void(const std::string&)>& say);

}  // namespace copse
