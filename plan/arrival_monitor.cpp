#include "plan/arrival_monitor.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "common/error.hpp"

namespace copse {

void check_arrival_options(const ArrivalOptions& options) {
  if (options.warmup < 0)
    throw UsageError("arrival warm-up must not be negative, got " + std::to_string(options.warmup));
  if (!(options.smoothing > 0 && options.smoothing <= 1))
    throw UsageError("arrival smoothing must lie in (0, 1], got " + std::to_string(options.smoothing));
  if (options.plans < 1) throw UsageError("arrival plans must be at least 1");
  if (options.resolution < 0) throw UsageError("arrival resolution must not be negative");
}

// ---- ArrivalEstimator ---------------------------------------------------------------

void ArrivalEstimator::begin(Picos now) {
  begin_ = now;
  edge_fraction_ = 0;
}

bool ArrivalEstimator::edge(Picos now, double fraction) {
  if (!(fraction > 0 && fraction <= 1))
    throw UsageError("edge(fraction): the fraction of the phase done must lie in (0, 1], got " +
                     std::to_string(fraction));
  if (has_edge()) return false;  // the first edge of a phase is the one that counts (its value is published)
  edge_time_ = now;
  edge_fraction_ = fraction;
  return true;
}

Picos ArrivalEstimator::predicted() const {
  if (!has_edge()) return begin_;
  // Proficz §3: the remaining time from the progress so far, linearly.
  const double extrapolated = static_cast<double>(edge_time_ - begin_) / edge_fraction_;
  return begin_ + static_cast<Picos>(std::llround(correction_ * extrapolated));
}

void ArrivalEstimator::arrive(Picos now) {
  if (has_edge()) {
    const double extrapolated = static_cast<double>(edge_time_ - begin_) / edge_fraction_;
    // A phase too short to measure teaches nothing.
    if (extrapolated > 0 && now > begin_) {
      const double seen = static_cast<double>(now - begin_) / extrapolated;
      correction_ = learned_ ? (1 - smoothing_) * correction_ + smoothing_ * seen : seen;
      learned_ = true;
    }
  }
  begin_ = now;
  edge_fraction_ = 0;
}

// ---- keys -----------------------------------------------------------------------------

ArrivalKey arrival_key(const std::vector<Picos>& predicted, Picos resolution) {
  ArrivalKey key;
  arrival_key(predicted, resolution, key);
  return key;
}

void arrival_key(const std::vector<Picos>& predicted, Picos resolution, ArrivalKey& key) {
  key.level.assign(predicted.size(), 0);
  key.scale = -1;
  if (predicted.empty()) return;
  const Picos first = *std::min_element(predicted.begin(), predicted.end());
  const Picos largest = *std::max_element(predicted.begin(), predicted.end()) - first;
  if (largest <= 0 || largest < resolution) return;
  for (std::size_t r = 0; r < predicted.size(); ++r) {
    const Picos gap = predicted[r] - first;
    if (gap < resolution) continue;
    key.level[r] = static_cast<std::int32_t>(
        std::llround(ArrivalKey::kLevels * static_cast<double>(gap) / static_cast<double>(largest)));
  }
  key.scale = static_cast<std::int32_t>(std::lround(4 * std::log2(static_cast<double>(largest))));
}

std::vector<Picos> arrival_of(const ArrivalKey& key) {
  std::vector<Picos> out(key.level.size(), 0);
  if (key.scale < 0) return out;
  const double largest = std::exp2(key.scale / 4.0);
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r] = static_cast<Picos>(std::llround(largest * key.level[r] / ArrivalKey::kLevels));
  return out;
}

// ---- ArrivalMonitor -------------------------------------------------------------------

std::optional<Picos> ArrivalMonitor::edge(Picos now, double fraction) {
  const bool first = estimator_.edge(now, fraction);
  if (!first || in_allreduce_ || published_ || !planned_by_arrival(calls_)) return std::nullopt;
  published_ = true;
  return estimator_.predicted();
}

std::optional<Picos> ArrivalMonitor::arrive(Picos now) {
  estimator_.arrive(now);
  in_allreduce_ = true;
  if (published_ || !planned_by_arrival(calls_)) return std::nullopt;
  published_ = true;
  return now;
}

void ArrivalMonitor::returned(Picos now, bool was_allreduce) {
  if (was_allreduce) {
    ++calls_;
    published_ = false;
    in_allreduce_ = false;
  }
  estimator_.begin(now);
}

// ---- ArrivalBoard ---------------------------------------------------------------------

ArrivalBoard::ArrivalBoard(int ranks) : ranks_(ranks) {}

void ArrivalBoard::publish(int rank, std::int64_t call, Picos value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Round& r = round_of(call);
    if (r.call != call) {
      r.call = call;
      r.count = 0;
      r.value.assign(static_cast<std::size_t>(ranks_), 0);
      r.in.assign(static_cast<std::size_t>(ranks_), 0);
    }
    r.value[static_cast<std::size_t>(rank)] = value;
    r.in[static_cast<std::size_t>(rank)] = 1;
    ++r.count;
  }
  changed_.notify_all();
}

void ArrivalBoard::wait(std::int64_t call, std::vector<Picos>& out, const std::function<void()>& check) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    const Round& r = round_of(call);
    if (r.call == call && r.count == ranks_) {
      out.assign(r.value.begin(), r.value.end());
      return;
    }
    // Blocks (never spins): woken by every publication, and every few
    // milliseconds to let `check` give up.
    changed_.wait_for(lock, std::chrono::milliseconds(20));
    lock.unlock();
    check();
    lock.lock();
  }
}

std::vector<int> ArrivalBoard::missing(std::int64_t call) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Round& r = round_of(call);
  std::vector<int> out;
  for (int q = 0; q < ranks_; ++q)
    if (r.call != call || !r.in[static_cast<std::size_t>(q)]) out.push_back(q);
  return out;
}

}  // namespace copse
