#pragma once
// What the copse subcommands share: their registration signature, option
// values parsed with the option's name in every error, and small formatting.

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cost_model.hpp"
#include "common/error.hpp"
#include "common/schedule.hpp"
#include "config/config.hpp"

namespace copse {

using Json = nlohmann::ordered_json;

// Every subcommand file defines one of these (cli/*_command.cpp): it adds its
// subcommand to `app`, taking its options' defaults from `config`; when the
// subcommand is the one parsed, `run_parsed` is set to the function that runs
// it (returning the exit status, throwing copse::Error for failures).
using RunParsed = std::function<int()>;
void add_algorithms_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_sim_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_emulate_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_verify_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_demo_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_topo_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_config_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_study_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_replay_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_calibrate_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_tree_command(CLI::App& app, const Config& config, RunParsed& run_parsed);
void add_tune_command(CLI::App& app, const Config& config, RunParsed& run_parsed);

inline constexpr const char* kSizeHelp = "SIZE: bytes, e.g. 1000, 1e6, 4KB (4000), 4KiB (4096), 1.5MiB";
inline constexpr const char* kTimeHelp = "TIME: seconds, or with a unit s, ms, us, ns, ps, e.g. 1.5us, 0.1ns, 1e-6";

// --config FILE on a subcommand: main.cpp reads it before parsing; this only
// documents it and lets CLI11 accept it.
void add_config_file_option(CLI::App* command);

// --collective C, --root R and --blocks N|auto, as sim and emulate take them
// (without blocks_auto: --blocks N, a whole number only).
void add_collective_options(CLI::App* command, std::string& collective, int& root, std::string& blocks,
                            bool blocks_auto = true);

// One schedule taken on its own, as verify and tree take it: --ranks P,
// --collective C, --root R, --blocks N (a whole number: nothing simulates to
// choose it) and --count N.
struct ScheduleShapeArgs {
  int ranks = 0;  // as given; chosen_ranks (cli/cluster_options.hpp) resolves it
  std::string collective = "allreduce";
  int root = 0;
  std::string blocks = "1";
  std::string count;  // empty: the default below
};
void add_schedule_shape_options(CLI::App* command, ScheduleShapeArgs& args);
// Their Shape for `ranks` ranks, by default of 2 max(P, blocks) + 1 elements
// per rank: uneven blocks, and no rank's share or block left empty.
// UsageError for a malformed --blocks or --count.
Shape schedule_shape(const ScheduleShapeArgs& args, int ranks);
// The JSON keys both report of it first: algorithm, collective, ranks, root,
// blocks, count.
Json schedule_shape_json(std::string_view algorithm, Collective collective, const Shape& shape);

// Re-throws a parse error with the option's name in front.
template <class F>
auto option_value(std::string_view option, F&& parse) {
  try {
    return parse();
  } catch (const UsageError& e) {
    throw UsageError(std::string(option) + ": " + e.what());
  }
}

std::uint64_t size_option(std::string_view option, const std::string& text);
double time_option(std::string_view option, const std::string& text);
// --blocks (or `option`, named in errors): "auto" (nullopt, when allowed)
// or a whole number >= 1.
std::optional<int> blocks_option(const std::string& text, bool allow_auto, std::string_view option = "--blocks");
Ports ports_option(const std::string& text);  // bi|uni (also bidirectional|unidirectional)
std::string_view ports_name(Ports ports);     // "bi" or "uni"
void require_at_least(std::string_view option, long long value, long long minimum);
// "5,8,1" -> {5, 8, 1}: ranks on each node (--ranks-per-node-list).
std::vector<int> parse_rank_counts(const std::string& text);

// `text` padded with spaces to `width`, on the right (or, with right, the left).
std::string pad(std::string text, std::size_t width, bool right = false);

struct WallStats {
  double min = 0;
  double median = 0;
};
WallStats wall_stats(std::vector<double> seconds);

}  // namespace copse
