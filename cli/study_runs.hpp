#pragma once
// The studies beside proficz (cli/study_runs.cpp): `copse study depth`,
// `bjorndalen`, `flat-hier` and `traff`, each a tools/study_*.hpp run with
// its table, --json and plot.

#include "cli/options.hpp"

namespace copse {

void add_depth_study(CLI::App* study, const Config& config, RunParsed& run_parsed);
void add_bjorndalen_study(CLI::App* study, RunParsed& run_parsed);
void add_flat_hier_study(CLI::App* study, const Config& config, RunParsed& run_parsed);
void add_traff_study(CLI::App* study, const Config& config, RunParsed& run_parsed);

}  // namespace copse
