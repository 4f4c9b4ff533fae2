#pragma once
// Option-value helpers shared by the copse subcommands.

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"

namespace copse {

// Re-throws a parse error with the option's name in front.
template <class F>
auto option_value(std::string_view option, F&& parse) {
  try {
    return parse();
  } catch (const UsageError& e) {
    throw UsageError(std::string(option) + ": " + e.what());
  }
}

// "5,8,1" -> {5, 8, 1}: ranks on each node (--ranks-per-node-list).
inline std::vector<int> parse_rank_counts(const std::string& text) {
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

}  // namespace copse
