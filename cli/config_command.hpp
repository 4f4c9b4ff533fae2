#pragma once
// `copse config`: every effective configuration value and where it came from.

#include <CLI/CLI.hpp>

namespace copse {

// Adds the `config` subcommand to `app`; after parsing, main runs
// run_config_command on it when it was chosen.
CLI::App* add_config_command(CLI::App& app);

// Prints the settings (table or --json). Returns the exit status; bad input
// (malformed file, unknown key, invalid value) throws UsageError.
int run_config_command(const CLI::App& cmd);

}  // namespace copse
