#include "cli/options.hpp"

#include <algorithm>
#include <charconv>

#include "common/text.hpp"
#include "common/units.hpp"

namespace copse {

void add_config_file_option(CLI::App* command) {
  command->add_option("--config", "config file (read before anything else; default: $COPSE_CONFIG, else ./copse.toml)")
      ->type_name("FILE");
}

void add_collective_options(CLI::App* command, std::string& collective, int& root, std::string& blocks,
                            bool blocks_auto) {
  // The choices from the schedule types' own list, so that help cannot lag
  // behind it: "allreduce, reduce, ... or alltoall".
  std::string choices;
  const auto collectives = all_collectives();
  for (std::size_t i = 0; i < collectives.size(); ++i)
    choices += std::string(i == 0                        ? ""
                           : i + 1 == collectives.size() ? " or "
                                                         : ", ") +
               std::string(to_string(collectives[i]));
  command->add_option("--collective", collective, choices)->type_name("C")->capture_default_str();
  command->add_option("--root", root, "root rank of reduce, bcast, scatter and gather")
      ->type_name("R")
      ->capture_default_str();
  command
      ->add_option(
          "--blocks", blocks,
          blocks_auto ? "pipeline blocks, or auto for the count that minimises simulated time" : "pipeline blocks")
      ->type_name(blocks_auto ? "N|auto" : "N")
      ->capture_default_str();
}

void add_schedule_shape_options(CLI::App* command, ScheduleShapeArgs& args) {
  command->add_option("--ranks", args.ranks, "participants (default with --schedule-file: the file's)")->type_name("P");
  add_collective_options(command, args.collective, args.root, args.blocks, false);
  command
      ->add_option("--count", args.count,
                   "elements per rank (default: 2*max(P, blocks)+1, so blocks are uneven and none is empty)")
      ->type_name("N");
}

Shape schedule_shape(const ScheduleShapeArgs& args, int ranks) {
  Shape shape;
  shape.ranks = ranks;
  shape.root = args.root;
  shape.blocks = *blocks_option(args.blocks, false);
  if (args.count.empty()) {
    shape.count = 2 * static_cast<std::uint64_t>(std::max(std::max(ranks, shape.blocks), 0)) + 1;
  } else {
    const char* end = args.count.data() + args.count.size();
    const auto [ptr, ec] = std::from_chars(args.count.data(), end, shape.count);
    if (ec != std::errc{} || ptr != end)
      throw UsageError("--count: expected a whole number of elements, got \"" + args.count + "\"");
  }
  return shape;
}

Json schedule_shape_json(std::string_view algorithm, Collective collective, const Shape& shape) {
  return Json{{"algorithm", algorithm}, {"collective", to_string(collective)},
              {"ranks", shape.ranks},   {"root", shape.root},
              {"blocks", shape.blocks}, {"count", shape.count}};
}

std::uint64_t size_option(std::string_view option, const std::string& text) {
  return option_value(option, [&] { return parse_size(text); });
}

double time_option(std::string_view option, const std::string& text) {
  return option_value(option, [&] { return parse_time(text); });
}

std::optional<int> blocks_option(const std::string& text, bool allow_auto, std::string_view option) {
  if (allow_auto && text == "auto") return std::nullopt;
  const std::string expected = allow_auto ? "'auto' or a whole number >= 1" : "a whole number >= 1";
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc{} || ptr != end)
    throw UsageError(std::string(option) + ": expected " + expected + ", got \"" + text + "\"");
  if (value < 1) throw UsageError(std::string(option) + ": the block count must be at least 1, got " + text);
  return value;
}

Ports ports_option(const std::string& text) {
  if (text == "bi" || text == "bidirectional") return Ports::bidirectional;
  if (text == "uni" || text == "unidirectional") return Ports::unidirectional;
  throw UsageError("--ports: expected bi or uni, got \"" + text + "\"");
}

std::string_view ports_name(Ports ports) { return ports == Ports::bidirectional ? "bi" : "uni"; }

void require_at_least(std::string_view option, long long value, long long minimum) {
  if (value < minimum)
    throw UsageError(std::string(option) + " must be at least " + std::to_string(minimum) + ", got " +
                     std::to_string(value));
}

std::vector<int> parse_rank_counts(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return UsageError("--ranks-per-node-list: " + why + " in \"" + text +
                      "\" (expected whole numbers >= 1 separated by commas, e.g. 5,8,1)");
  };
  std::vector<int> counts;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    int value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || error != std::errc{} || end != item.data() + item.size())
      throw bad("\"" + item + "\" is not a whole number");
    if (value < 1) throw bad("a node must hold at least 1 rank");
    counts.push_back(value);
    if (comma == text.size()) break;
    start = comma + 1;
  }
  return counts;
}

std::string pad(std::string text, std::size_t width, bool right) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

WallStats wall_stats(std::vector<double> seconds) {
  if (seconds.empty()) return {};
  std::sort(seconds.begin(), seconds.end());
  return {seconds.front(), median_of_sorted(seconds)};
}

}  // namespace copse
