#pragma once
// Error types. A UsageError is bad input from a user (the CLI maps it to exit
// status 2); everything else is a failure of the run itself.

#include <stdexcept>
#include <string>

namespace copse {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A blocking wait ran past its deadline; the message names the peer and step.
struct TimeoutError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace copse
