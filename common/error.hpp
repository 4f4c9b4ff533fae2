#pragma once
// One error hierarchy for the whole library. Every error copse throws is a
// copse::Error whose kind says what went wrong in terms a caller can act on;
// the CLI maps the kind to its exit status (exit_status below), and the MPI
// layer will map it to an MPI error class. Code that needs to tell kinds
// apart catches the subclass (UsageError, ScheduleError, ...) or reads
// kind(); code that only reports catches Error (or std::exception).

#include <stdexcept>
#include <string>
#include <string_view>

namespace copse {

enum class ErrorKind {
  usage,     // bad input from a user: unknown name, malformed value, out of range
  schedule,  // a schedule is wrong: mismatched sizes, deadlock, bad peer or region
  timeout,   // a blocking wait ran past its deadline
  aborted,   // another rank failed; its error is the one to report
  failed,    // a run completed with a wrong answer (unverified result, unproven schedule)
  system,    // the operating system or a library refused: hwloc, shared memory, threads
};

std::string_view to_string(ErrorKind kind);

// The CLI's exit status for an error of this kind: 2 for bad input, 1 for
// anything that went wrong in the run itself.
int exit_status(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Bad input from a user (the CLI's exit status 2).
struct UsageError : Error {
  explicit UsageError(const std::string& message) : Error(ErrorKind::usage, message) {}
};

// A schedule is wrong: mismatched sizes, deadlock, bad peer. The message names
// the rank, step and elements involved.
struct ScheduleError : Error {
  explicit ScheduleError(const std::string& message) : Error(ErrorKind::schedule, message) {}
};

// A blocking wait ran past its deadline; the message names the peer and step.
struct TimeoutError : Error {
  explicit TimeoutError(const std::string& message) : Error(ErrorKind::timeout, message) {}
};

// Thrown out of a rank's wait when another rank has failed; the other rank's
// error is the one to report.
struct LinkAborted : Error {
  LinkAborted() : Error(ErrorKind::aborted, "aborted: another rank failed") {}
};

// A run finished, but its answer is wrong (a result that does not match the
// reference, a schedule the verifier does not prove, a virtual time that
// differs from the simulator's).
struct RunFailure : Error {
  explicit RunFailure(const std::string& message) : Error(ErrorKind::failed, message) {}
};

// The operating system or a library refused what copse asked of it.
struct SystemError : Error {
  explicit SystemError(const std::string& message) : Error(ErrorKind::system, message) {}
};

}  // namespace copse
