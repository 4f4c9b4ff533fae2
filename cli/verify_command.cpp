// copse verify: one schedule proven (or not) by symbolic execution.

#include <charconv>
#include <iostream>

#include "cli/cluster_options.hpp"
#include "cli/options.hpp"
#include "internode/verifier.hpp"

namespace copse {
namespace {

struct VerifyArgs {
  AlgorithmArgs choice;
  std::string collective = "allreduce";
  int ranks = 0;
  int root = 0;
  std::string blocks = "1";
  std::string count;  // empty: the default
  bool json = false;
};

int run_verify(VerifyArgs args) {
  const AlgorithmInfo& algorithm = chosen_algorithm(args.choice, args.collective);
  args.ranks = chosen_ranks(args.choice, args.ranks);
  Shape shape;
  shape.ranks = args.ranks;
  shape.root = args.root;
  shape.blocks = *blocks_option(args.blocks, false);
  // Default: uneven blocks, and no rank's share or block left empty.
  if (args.count.empty()) {
    shape.count = 2 * static_cast<std::uint64_t>(std::max(std::max(args.ranks, shape.blocks), 0)) + 1;
  } else {
    const char* end = args.count.data() + args.count.size();
    const auto [ptr, ec] = std::from_chars(args.count.data(), end, shape.count);
    if (ec != std::errc{} || ptr != end)
      throw UsageError("--count: expected a whole number of elements, got \"" + args.count + "\"");
  }
  validate_shape(algorithm, shape);

  const VerifyResult result = verify(algorithm, shape);
  if (args.json) {
    std::cout << Json{{"algorithm", algorithm.name}, {"collective", to_string(algorithm.collective)},
                      {"ranks", shape.ranks},        {"root", shape.root},
                      {"blocks", shape.blocks},      {"count", shape.count},
                      {"proven", result.proven},     {"message", result.message}}
                     .dump(2)
              << "\n";
  } else if (result.proven) {
    std::cout << "proven: " << to_string(algorithm.collective) << " " << algorithm.name << " on " << shape.ranks
              << " ranks, " << shape.count << " elements, " << shape.blocks
              << (shape.blocks == 1 ? " block" : " blocks");
    if (algorithm.collective != Collective::allreduce) std::cout << ", root " << shape.root;
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
  command->add_option("--ranks", args->ranks, "participants (default with --schedule-file: the file's)")
      ->type_name("P");
  command
      ->add_option("--collective", args->collective, "allreduce, reduce, bcast, barrier, allgather or reduce_scatter")
      ->type_name("C")
      ->capture_default_str();
  command->add_option("--root", args->root, "root rank of reduce and bcast")->type_name("R")->capture_default_str();
  command->add_option("--blocks", args->blocks, "pipeline blocks")->type_name("N")->capture_default_str();
  command
      ->add_option("--count", args->count,
                   "elements per rank (default: 2*max(P, blocks)+1, so blocks are uneven and none is empty)")
      ->type_name("N");
  add_config_file_option(command);
  command->add_flag("--json", args->json, "print one JSON object");
  command->callback([args, command, &run_parsed] {
    note_algorithm_options(command, args->choice);
    run_parsed = [args] { return run_verify(*args); };
  });
}

}  // namespace copse
