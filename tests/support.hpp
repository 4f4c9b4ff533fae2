#pragma once
// Small helpers the Catch2 suites share.

#include <exception>
#include <string>

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

}  // namespace copse::testing
