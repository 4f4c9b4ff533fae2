#include "common/error.hpp"

namespace copse {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage: return "usage";
    case ErrorKind::schedule: return "schedule";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::aborted: return "aborted";
    case ErrorKind::failed: return "failed";
    case ErrorKind::system: return "system";
  }
  return "?";
}

int exit_status(ErrorKind kind) { return kind == ErrorKind::usage ? 2 : 1; }

}  // namespace copse
