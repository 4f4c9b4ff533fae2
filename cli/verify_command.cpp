// copse verify: one schedule proven (or not) by symbolic execution.

#include <iostream>

#include "algorithms/verifier.hpp"
#include "cli/cluster_options.hpp"
#include "cli/options.hpp"

namespace copse {
namespace {

struct VerifyArgs {
  AlgorithmArgs choice;
  ScheduleShapeArgs shape;
  bool json = false;
};

int run_verify(const VerifyArgs& args) {
  const AlgorithmInfo& algorithm = chosen_algorithm(args.choice, args.shape.collective);
  const Shape shape = schedule_shape(args.shape, chosen_ranks(args.choice, args.shape.ranks));
  validate_shape(algorithm, shape);

  const VerifyResult result = verify(algorithm, shape);
  if (args.json) {
    Json out = schedule_shape_json(algorithm.name, algorithm.collective, shape);
    out["proven"] = result.proven;
    out["message"] = result.message;
    std::cout << out.dump(2) << "\n";
  } else if (result.proven) {
    std::cout << "proven: " << to_string(algorithm.collective) << " " << algorithm.name << " on " << shape.ranks
              << " ranks, " << shape.count << " elements, " << shape.blocks
              << (shape.blocks == 1 ? " block" : " blocks");
    if (takes_root(algorithm.collective)) std::cout << ", root " << shape.root;
    std::cout << ": sends and receives match, no deadlock, the result is correct\n";
  }
  if (!result.proven) throw RunFailure("not proven: " + result.message);
  return 0;
}

}  // namespace

void add_verify_command(CLI::App& app, const Config&, RunParsed& run_parsed) {
  auto args = std::make_shared<VerifyArgs>();
  auto* command =
      app.add_subcommand("verify", "prove one schedule correct by symbolic execution (exit 0 only when proven)");
  add_algorithm_options(command, args->choice);
  add_schedule_shape_options(command, args->shape);
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print one JSON object");
  command->callback([args, command, &run_parsed] {
    note_algorithm_options(command, args->choice);
    run_parsed = [args] { return run_verify(*args); };
  });
}

}  // namespace copse
