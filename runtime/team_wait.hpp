#pragma once
// How the thread Team (runtime/comm.hpp) and the MPI Team (runtime/mpi_comm.hpp)
// wait for their peers, written once for both: the handler of wait reports,
// and the waits they make outside the link engine (the arrival agreement),
// which poll for their own progress under the team's wait_timeout and
// wait_report, and say whom they wait for as the engine's waits do.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/link.hpp"
#include "common/wait.hpp"

namespace copse {

using WaitReporter = std::function<void(const std::string&)>;

// `given` (TeamOptions/CommOptions::on_wait_report), or else the default
// handler: one line "copse: MESSAGE" on stderr.
WaitReporter wait_reporter(WaitReporter given);

// A team's waits (its link runs and its own): rounds are "call"s, reports go
// to wait_reporter(given).
WaitSettings team_waits(const std::optional<std::chrono::milliseconds>& timeout, std::chrono::milliseconds report_every,
                        WaitReporter given);

// The policy of a team's own wait begun now: past `timeout` (if set) it fails
// with TimeoutError "<waiting_for()>: timed out after N ms"; every
// `report_every` (if non-zero) it passes waiting_for() to `report`.
WaitPolicy team_wait_policy(const std::optional<std::chrono::milliseconds>& timeout,
                            std::chrono::milliseconds report_every, WaitReporter report,
                            std::function<std::string()> waiting_for);

// A wait that polls for its own progress (a board under a mutex, MPI
// requests) under a WaitPolicy: call look() between polls. It throws
// TimeoutError(policy.timeout_message()) past the deadline and calls
// report() every report_every (policy.check is not called: a polling caller
// checks what it must itself, as often as it polls).
class PolledWait {
 public:
  explicit PolledWait(WaitPolicy policy);
  void look();

 private:
  WaitPolicy policy_;
  Deadline next_report_;
};

// What a rank waiting in the arrival agreement of allreduce `call` says
// (Comm::edge): the ranks whose prediction it still misses.
std::string arrival_wait_text(std::int64_t call, int rank, const std::vector<int>& missing);

}  // namespace copse
