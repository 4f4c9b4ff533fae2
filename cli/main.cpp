// copse: the command-line program. This file parses the command line and maps
// errors to exit statuses; each subcommand lives in its own cli/*_command.cpp.
//
// The interface is a contract other tools script against (tests/cli_*.sh
// check it):
//   exit 0  success
//   exit 1  the run failed: wrong result, unproven schedule, schedule error,
//           timeout, virtual time differing from the simulator's
//   exit 2  bad input (unknown name, malformed size or time, out-of-range
//           number, operator the algorithm cannot serve, CLI syntax)
// Every failure prints exactly one line on stderr, starting "copse: ".

#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "common/text.hpp"

namespace copse {
namespace {

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The configuration in force (defaults < config file < COPSE_* variables);
// a --config FILE anywhere on the command line names the file. Its values
// become the defaults of the matching options, so a flag on the command line
// has the last word and --help shows what a run would really use.
Config load_config(int argc, char** argv) {
  LoadArgs load;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--config" && i + 1 < argc)
      load.config_file = argv[i + 1];
    else if (arg.starts_with("--config="))
      load.config_file = std::string(arg.substr(9));
  }
  return Config::load(load);
}

int run(int argc, char** argv) {
  const Config config = load_config(argc, argv);
  CLI::App app{"copse: collective-communication schedules, their verifier, simulator and emulated cluster.\n"};
  app.name("copse");
  app.require_subcommand(1);
  app.footer(std::string("\n") + kSizeHelp + "\n" + kTimeHelp +
             "\nExit status: 0 success; 1 the run failed (wrong result, unproven schedule, timeout);"
             " 2 bad input.\n" +
             kProgressHelp + "\nRun 'copse SUBCOMMAND --help' for a subcommand's options.");

  RunParsed run_parsed;
  for (auto add : {add_algorithms_command, add_sim_command, add_emulate_command, add_verify_command, add_demo_command,
                   add_topo_command, add_config_command, add_study_command, add_replay_command, add_calibrate_command,
                   add_tree_command, add_tune_command})
    add(app, config, run_parsed);

  // CLI11 reports a mistyped subcommand as a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> known;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) known.push_back(sub->get_name());
    if (std::find(known.begin(), known.end(), argv[1]) == known.end())
      throw UsageError("unknown subcommand '" + std::string(argv[1]) + "' (known: " + join(known, ", ") + ")");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "copse";
    for (const auto* sub : app.get_subcommands())
      if (sub) where += " " + sub->get_name();
    std::cerr << "copse: " << one_line(e.what()) << " (see '" << where << " --help')\n";
    return 2;
  }
  if (run_parsed) return run_parsed();
  std::cerr << "copse: no subcommand (see 'copse --help')\n";
  return 2;
}

// How each kind of failure is introduced on its one line of stderr.
std::string_view prefix(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::schedule: return "schedule error: ";
    case ErrorKind::timeout: return "timeout: ";
    case ErrorKind::usage:
    case ErrorKind::failed: return "";
    case ErrorKind::aborted:
    case ErrorKind::system: break;
  }
  return "error: ";
}

}  // namespace
}  // namespace copse

int main(int argc, char** argv) {
  try {
    return copse::run(argc, argv);
  } catch (const copse::Error& e) {
    std::cout.flush();
    std::cerr << "copse: " << copse::prefix(e.kind()) << copse::one_line(e.what()) << "\n";
    return copse::exit_status(e.kind());
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "copse: error: " << copse::one_line(e.what()) << "\n";
    return 1;
  }
}
