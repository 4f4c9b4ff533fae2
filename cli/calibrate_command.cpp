// copse calibrate: the cost model's alpha and beta per level of this machine
// and gamma per reduction kernel, measured (tools/calibrate.hpp), printed with
// their spread and written as a [model] config fragment. The inter-node
// level is measured under mpirun by copse_calibrate_mpi (cli/calibrate_mpi.cpp),
// which writes into the same file.

#include <iostream>
#include <memory>

#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "tools/calibrate.hpp"

namespace copse {
namespace {

struct CalibrateArgs {
  std::string output = "copse-model.toml";
  int repetitions = 7;
  std::string max_bytes = "4MiB";
  bool quick = false;
  bool json = false;
};

int run_calibrate(const CalibrateArgs& args, const CLI::App& command, const Config& config) {
  CalibrateOptions options;
  options.quick = args.quick;
  options.repetitions = args.quick && command.get_option("--repetitions")->count() == 0 ? 3 : args.repetitions;
  require_at_least("--repetitions", options.repetitions, 1);
  options.max_bytes = size_option("--max-bytes", args.max_bytes);
  if (const auto timeout = config.options().runtime.wait_timeout_ms()) options.wait_timeout = *timeout;
  check_options(options);
  check_model_file(args.output);  // before measuring, not after

  ProgressLine progress("copse calibrate", args.json);
  progress.phase("measuring alpha and beta per level, gamma per kernel");
  const Calibration calibration = calibrate_node(options);
  progress.finish();
  write_model_file(args.output, calibration);
  std::cerr << clamp_warnings(calibration);
  std::cout << (args.json ? report_json(calibration, args.output) + "\n" : format_report(calibration, args.output));
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, const Config& config, RunParsed& run_parsed) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* command = app.add_subcommand(
      "calibrate",
      "measure the cost model on this machine (alpha and beta per level by ping-pong over copse's links between "
      "pinned threads, gamma per reduction kernel) and write them as a [model] config fragment");
  command->add_option("--output", args->output, "the model file to write (a previous calibration's is updated)")
      ->type_name("FILE")
      ->capture_default_str();
  command->add_option("--repetitions", args->repetitions, "repetitions of every measurement (--quick: 3)")
      ->capture_default_str();
  command->add_option("--max-bytes", args->max_bytes, "the largest message of the sweep (from 8 B, powers of two)")
      ->type_name("SIZE")
      ->capture_default_str();
  command->add_flag("--quick", args->quick, "fewer sizes (up to 256 KiB) and iterations: a second or two, for tests");
  command->add_flag("--json", args->json, "print one JSON object");
  add_config_file_option(command);
  command->footer(
      "The inter-node level: mpirun -np 2 copse_calibrate_mpi --output FILE (the same file: its keys are added).\n"
      "runtime.wait_timeout bounds every wait (default here: 10 s).");
  command->callback([args, command, &config, &run_parsed] {
    run_parsed = [args, command, &config] { return run_calibrate(*args, *command, config); };
  });
}

}  // namespace copse
