// copse_calibrate_mpi: the inter-node level of the cost model, measured under
// mpirun, for the model file `copse calibrate` writes (the copse program links
// no MPI, so this part is a program of its own, built when MPI is found).
//
//   mpirun -np 2 copse_calibrate_mpi [--output FILE] [--repetitions N] [--max-bytes SIZE] [--quick] [--json]
//
// MPI ranks 0 and 1 become copse ranks on two (virtual) nodes and run the same
// ping-pong and streaming sweeps as `copse calibrate` (tools/calibrate.hpp,
// run_pair) through the step executor and the MPI link (transport/mpi_link.hpp),
// the path inter-node transfers of collectives take. Rank 0 prints the figures
// with their spread and writes inter_alpha and inter_beta into FILE, keeping
// the keys a previous `copse calibrate` wrote there. Other ranks wait. Run the
// two ranks on different hosts for the network, on one host for virtual nodes
// (the MPI library's shared memory).
//
// Every MPI call goes through PMPI_: libcopse_mpi.so, which this program
// links for the MPI link, interposes the MPI_ collectives. Exit status: 0,
// 2 for bad input (every rank parses the same arguments and stops alike), 1
// (through MPI_Abort, so that no rank waits for ever) when a measurement fails.

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/units.hpp"
#include "exec/step_executor.hpp"
#include "tools/calibrate.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"
#include "transport/mpi_link.hpp"

namespace {

using namespace copse;

struct Args {
  std::string output = "copse-model.toml";
  int repetitions = 7;
  std::string max_bytes = "4MiB";
  std::string timeout = "10s";
  bool quick = false;
  bool json = false;
};

std::string processor_name() {
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int length = 0;
  mpi::check_mpi(PMPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  return std::string(name, static_cast<std::size_t>(length));
}

// Ranks 0 and 1 of `pair` measure; returns rank 0's level.
LevelResult measure(MPI_Comm pair, const CalibrateOptions& options) {
  int me = 0;
  mpi::check_mpi(PMPI_Comm_rank(pair, &me), "MPI_Comm_rank");
  // Where the other rank runs: a host name each way.
  std::string host = processor_name(), other(MPI_MAX_PROCESSOR_NAME, '\0');
  MPI_Status status;
  mpi::check_mpi(PMPI_Sendrecv(host.data(), static_cast<int>(host.size()), MPI_CHAR, 1 - me, 0, other.data(),
                               MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 1 - me, 0, pair, &status),
                 "MPI_Sendrecv");
  int length = 0;
  PMPI_Get_count(&status, MPI_CHAR, &length);
  other.resize(static_cast<std::size_t>(length));

  std::vector<RankMap::Place> places{{0, 0, 0, 0}, {1, 1, 0, 1}};  // two nodes, a process each
  const RankMap layout = RankMap::from_places(places);
  mpi::MpiChannel channel(pair, 1);
  const ExecutorConfig config =
      executor_config(layout, std::nullopt, wait_settings(options.wait_timeout, "measurement"));
  mpi::MpiLink link(channel, layout, me);
  LinkRank c;
  c.rank = me;
  StepExecutor executor(config, nullptr, &link);  // the two share no memory: no shared-memory link
  std::vector<std::byte> buffer(static_cast<std::size_t>(sweep_sizes(options).back()));
  PairSweeps sweeps = run_pair(executor, c, buffer.data(), sweep_sizes(options), options);

  LevelResult level;
  level.level = "network";
  const bool one_host = host == other;
  level.description = one_host ? "processes on virtual nodes of one host" : "processes on different hosts";
  level.pair = "MPI ranks 0 (" + host + ") and 1 (" + other + ")";
  level.link = "MPI link";
  level.role = "inter";
  level.ping_pong = std::move(sweeps.ping_pong);
  level.stream = std::move(sweeps.stream);
  return level;
}

// Set once ranks 0 and 1 measure: an error from then on is one rank's (the
// others would wait for it), so the job is aborted.
bool g_measuring = false;

int run(int argc, char** argv, int world_rank, int world_size) {
  Args args;
  CLI::App app{
      "copse_calibrate_mpi: the inter-node level of copse's cost model (inter_alpha, inter_beta), measured "
      "between MPI ranks 0 and 1 over copse's MPI link; run it under mpirun -np 2"};
  app.add_option("--output", args.output, "the model file to write (a previous calibration's is updated)")
      ->type_name("FILE")
      ->capture_default_str();
  app.add_option("--repetitions", args.repetitions, "repetitions of every measurement (--quick: 3)")
      ->capture_default_str();
  app.add_option("--max-bytes", args.max_bytes, "the largest message of the sweep (from 8 B, powers of two)")
      ->type_name("SIZE")
      ->capture_default_str();
  app.add_option("--timeout", args.timeout, "the longest a wait may last")->type_name("TIME")->capture_default_str();
  app.add_flag("--quick", args.quick, "fewer sizes (up to 256 KiB) and iterations, for tests");
  app.add_flag("--json", args.json, "print one JSON object");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return world_rank == 0 ? app.exit(e) : 0;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  CalibrateOptions options;
  options.quick = args.quick;
  options.repetitions = args.quick && app.get_option("--repetitions")->count() == 0 ? 3 : args.repetitions;
  options.max_bytes = parse_size(args.max_bytes);
  const double timeout = parse_time(args.timeout);
  options.wait_timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000 + 0.999));
  check_options(options);
  if (world_size < 2) throw UsageError("needs at least 2 MPI processes (mpirun -np 2 copse_calibrate_mpi ...)");
  // Rank 0 writes the file: it checks it before anyone measures, and tells the others.
  int refused = 0;
  std::string why;
  if (world_rank == 0) {
    try {
      check_model_file(args.output);
    } catch (const UsageError& e) {
      refused = 1;
      why = e.what();
    }
  }
  mpi::check_mpi(PMPI_Bcast(&refused, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
  if (refused) throw UsageError(why);

  MPI_Comm pair = MPI_COMM_NULL;
  mpi::check_mpi(PMPI_Comm_split(MPI_COMM_WORLD, world_rank < 2 ? 0 : MPI_UNDEFINED, world_rank, &pair),
                 "MPI_Comm_split");
  g_measuring = true;
  if (pair != MPI_COMM_NULL) {
    mpi::check_mpi(PMPI_Comm_set_errhandler(pair, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    LevelResult level = measure(pair, options);
    if (world_rank == 0) {
      Calibration calibration;
      calibration.machine = "MPI ranks 0 and 1 of " + std::to_string(world_size);
      calibration.options = options;
      calibration.levels.push_back(std::move(level));
      write_model_file(args.output, calibration);
      std::cerr << clamp_warnings(calibration);
      std::cout << (args.json ? report_json(calibration, args.output) + "\n" : format_report(calibration, args.output))
                << std::flush;
    }
    PMPI_Comm_free(&pair);
  }
  mpi::check_mpi(PMPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  PMPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  try {
    status = run(argc, argv, rank, size);
  } catch (const copse::Error& e) {
    status = copse::exit_status(e.kind());
    // Bad input is the same on every rank: rank 0 says so, all stop alike.
    if (g_measuring || rank == 0)
      std::fprintf(stderr, "copse_calibrate_mpi: %s%s\n",
                   rank == 0 ? "" : ("rank " + std::to_string(rank) + ": ").c_str(), e.what());
    if (g_measuring) PMPI_Abort(MPI_COMM_WORLD, status);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "copse_calibrate_mpi: rank %d: %s\n", rank, e.what());
    PMPI_Abort(MPI_COMM_WORLD, 1);
  }
  PMPI_Finalize();
  return status;
}
