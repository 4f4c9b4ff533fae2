#pragma once
// A progress line on stderr for the CLI's long runs (sim, emulate, calibrate,
// demo, study): what is running, how much of it is done and an estimate of
// the time left, redrawn in place and erased when the run ends, so that
// nothing of it stays on the screen or reaches stdout.
//
// It appears only when stderr is a terminal, never with --json (machine
// output), and only once the run has lasted COPSE_PROGRESS_AFTER (a TIME,
// default 2 s; "off" never): a short run prints nothing extra.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "common/progress.hpp"

namespace copse {

// What --help says of COPSE_PROGRESS_AFTER (kProgressAfterEnv).
inline constexpr const char* kProgressHelp =
    "COPSE_PROGRESS_AFTER=TIME: on a terminal, a run lasting longer than this (default 2s; off: never) shows a "
    "progress line on stderr, erased at its end; never with --json.";

class ProgressLine {
 public:
  // `command` names the run ("copse sim"); `machine_output`: --json, which
  // keeps the line away. UsageError for a malformed COPSE_PROGRESS_AFTER.
  ProgressLine(std::string command, bool machine_output);
  ~ProgressLine();  // finish()
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // What runs now ("simulating dual-root on 1048576 ranks"), counted in
  // `unit` ("points"; empty: not counted, the line shows the time spent).
  void phase(std::string text, std::string unit = "");
  // `done` of `total` units of the phase are done.
  void advance(std::uint64_t done, std::uint64_t total);
  // Runs `print` (which writes to stdout: a table's row) with the line out
  // of its way: erased before, redrawn after.
  void above(const std::function<void()>& print);
  // Stops the line and erases it: before the run's output. Idempotent.
  void finish();
  // advance() as a callback for the library (valid while this line lives).
  ProgressCallback callback();

 private:
  void run();
  std::string text_now();  // under mutex_
  void draw();             // under mutex_

  using Clock = std::chrono::steady_clock;
  std::string command_;
  bool enabled_ = false;
  Clock::duration after_{};
  Clock::time_point start_, phase_start_;
  std::string phase_, unit_;
  std::uint64_t done_ = 0, total_ = 0;
  bool drawn_ = false, stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread drawer_;
};

}  // namespace copse
