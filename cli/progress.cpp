// ProgressLine: a drawing thread wakes every quarter second and, once the run
// has lasted long enough, redraws the line from the latest counts; the
// workers only store counts under a mutex, so reporting costs them nothing
// that could slow a simulation.

#include "cli/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "common/error.hpp"
#include "common/units.hpp"

namespace copse {
namespace progress_line {

constexpr auto kRedraw = std::chrono::milliseconds(250);

// COPSE_PROGRESS_AFTER as a duration; nullopt for off.
std::optional<std::chrono::steady_clock::duration> progress_after() {
  const char* text = std::getenv(kProgressAfterEnv.data());
  if (!text || !*text) return std::chrono::seconds(2);
  const std::string value = text;
  if (value == "off" || value == "never") return std::nullopt;
  try {
    const double seconds = parse_time(value);
    if (!(seconds >= 0)) throw UsageError("negative");
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  } catch (const UsageError& e) {
    throw UsageError(std::string(kProgressAfterEnv) + "=" + value + ": expected a TIME (e.g. 2s, 0) or off (" +
                     e.what() + ")");
  }
}

// "7 s", "3 min 5 s", "2 h 4 min"
std::string duration_text(double seconds) {
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s / 60 % 60) + " min";
}

// The terminal's width, so the line never wraps (a wrapped line cannot be erased with \r).
std::size_t terminal_columns() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 10) return size.ws_col;
  return 80;
}

}  // namespace progress_line

ProgressLine::ProgressLine(std::string command, bool machine_output)
    : command_(std::move(command)), start_(Clock::now()), phase_start_(start_) {
  const auto after = progress_line::progress_after();  // parsed even when unused: a typo is an error everywhere
  enabled_ = after && !machine_output && isatty(STDERR_FILENO) == 1;
  if (!enabled_) return;
  after_ = *after;
  if (after_ <= Clock::duration::zero()) {
    const std::lock_guard lock(mutex_);
    draw();  // at once, even if the run ends before the drawer's first turn
  }
  drawer_ = std::thread([this] { run(); });
}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::finish() {
  if (!drawer_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  drawer_.join();
  if (drawn_) std::fputs("\r\033[K", stderr), std::fflush(stderr);
  drawn_ = false;
}

void ProgressLine::phase(std::string text, std::string unit) {
  std::lock_guard lock(mutex_);
  phase_ = std::move(text);
  unit_ = std::move(unit);
  done_ = total_ = 0;
  phase_start_ = Clock::now();
  if (drawn_ && !stop_) draw();  // the new phase at once, not at the next redraw
}

void ProgressLine::advance(std::uint64_t done, std::uint64_t total) {
  std::lock_guard lock(mutex_);
  const bool first_count = total_ == 0 && total > 0;
  done_ = done;
  total_ = total;
  // The count's first appearance at once, as a new phase's: a study of a
  // quarter second would otherwise end before the next redraw shows it.
  if (first_count && drawn_ && !stop_) draw();
}

void ProgressLine::above(const std::function<void()>& print) {
  std::lock_guard lock(mutex_);
  if (drawn_) std::fputs("\r\033[K", stderr), std::fflush(stderr);
  print();
  std::fflush(stdout);
  std::cout.flush();
  if (drawn_ && !stop_) draw();
}

ProgressCallback ProgressLine::callback() {
  return [this](std::uint64_t done, std::uint64_t total) { advance(done, total); };
}

std::string ProgressLine::text_now() {
  const auto now = Clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string text = phase_.empty() ? command_ : command_ + ": " + phase_;
  if (!unit_.empty() && total_ > 0) {
    text += ", " + std::to_string(done_) + " of " + std::to_string(total_) + " " + unit_;
    const double in_phase = std::chrono::duration<double>(now - phase_start_).count();
    if (done_ > 0 && done_ < total_)
      text +=
          ", about " +
          progress_line::duration_text(in_phase * static_cast<double>(total_ - done_) / static_cast<double>(done_)) +
          " left";
  }
  return text + " (" + progress_line::duration_text(elapsed) + ")";
}

void ProgressLine::draw() {
  std::string text = text_now();
  const std::size_t width = progress_line::terminal_columns() - 1;
  if (text.size() > width) text.resize(width);
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (Clock::now() - start_ >= after_) draw();
    const auto now = Clock::now();
    wake_.wait_until(lock, now < start_ + after_ ? start_ + after_ : now + progress_line::kRedraw,
                     [this] { return stop_; });
  }
}

}  // namespace copse
