#include "runtime/team_wait.hpp"

#include <cstdio>
#include <utility>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

WaitReporter wait_reporter(WaitReporter given) {
  if (given) return given;
  return [](const std::string& message) { std::fprintf(stderr, "copse: %s\n", message.c_str()); };
}

WaitSettings team_waits(const std::optional<std::chrono::milliseconds>& timeout, std::chrono::milliseconds report_every,
                        WaitReporter given) {
  return wait_settings(timeout, "call", report_every, wait_reporter(std::move(given)));
}

WaitPolicy team_wait_policy(const std::optional<std::chrono::milliseconds>& timeout,
                            std::chrono::milliseconds report_every, WaitReporter report,
                            std::function<std::string()> waiting_for) {
  WaitPolicy p;
  if (timeout) {
    p.deadline = std::chrono::steady_clock::now() + *timeout;
    p.timeout_message = [waiting_for, ms = timeout->count()] {
      return waiting_for() + ": timed out after " + std::to_string(ms) + " ms";
    };
  }
  if (report_every.count() > 0) {
    p.report_every = report_every;
    p.report = [report = std::move(report), waiting_for] { report(waiting_for()); };
  }
  return p;
}

PolledWait::PolledWait(WaitPolicy policy) : policy_(std::move(policy)) {
  next_report_ = policy_.report ? std::chrono::steady_clock::now() + policy_.report_every : Deadline::max();
}

void PolledWait::look() {
  const auto now = std::chrono::steady_clock::now();
  if (now >= policy_.deadline)
    throw TimeoutError(policy_.timeout_message ? policy_.timeout_message() : "wait timed out");
  if (now >= next_report_) {
    policy_.report();
    next_report_ = now + policy_.report_every;
  }
}

std::string arrival_wait_text(std::int64_t call, int rank, const std::vector<int>& missing) {
  return "call " + std::to_string(call) + " (allreduce): rank " + std::to_string(rank) +
         " is waiting for the arrival prediction (Comm::edge, or the arrival) of rank(s) " + join(missing, ", ");
}

}  // namespace copse
