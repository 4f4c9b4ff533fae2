#pragma once
// Small helpers the Catch2 suites share.

#include <exception>
#include <numeric>
#include <string>
#include <vector>

namespace copse::testing {

// The message of a captured exception ("" for none, "unknown exception" for
// one that is not a std::exception).
inline std::string message_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// The ranks first, first + 1, ..., last.
inline std::vector<int> inclusive_range(int first, int last) {
  std::vector<int> ranks(static_cast<std::size_t>(last - first + 1));
  std::iota(ranks.begin(), ranks.end(), first);
  return ranks;
}

}  // namespace copse::testing
