#include "runtime/read_choice.hpp"

#include <bit>

#include "common/text.hpp"

namespace copse {

namespace {

// The chosen collectives' places in ReadChoice::kinds_: one row of 64
// powers of two each.
int row_of(Collective c) {
  switch (c) {
    case Collective::bcast: return 0;
    case Collective::allgather: return 1;
    case Collective::reduce: return 2;
    case Collective::reduce_scatter: return 3;
    default: return -1;
  }
}

constexpr int kPowers = 64;

}  // namespace

ReadChoice::ReadChoice() : kinds_(4 * kPowers) {}

bool ReadChoice::chooses(Collective c, std::size_t bytes) { return row_of(c) >= 0 && bytes >= kFromBytes; }

ReadChoice::Kind& ReadChoice::kind(Collective c, std::size_t bytes) {
  const auto power = static_cast<std::size_t>(std::bit_width(bytes) - 1);  // bytes >= kFromBytes > 0
  return kinds_[static_cast<std::size_t>(row_of(c)) * kPowers + power];
}

bool ReadChoice::reads(Collective c, std::size_t bytes) {
  current_ = &kind(c, bytes);
  const std::uint32_t at = current_->calls % kTrialEvery;
  // A trial: kTrialCalls calls copy, then as many read. In runs, not
  // alternating: the first call of a way after the other pays for the
  // switch (np 2, bcast of 32 KiB through the ring: 1.9 us a call in a run,
  // 23 us alternating with reads), which a run's median leaves out.
  current_reads_ = at < 2 * kTrialCalls ? at >= kTrialCalls : current_->read;
  return current_reads_;
}

bool ReadChoice::timed(double seconds) {
  Kind& k = *current_;
  const std::uint32_t at = k.calls++ % kTrialEvery;
  if (at >= 2 * kTrialCalls) return false;
  k.trial[current_reads_ ? 1 : 0][at % kTrialCalls] = seconds;
  return at == 2 * kTrialCalls - 1;
}

std::array<double, 2> ReadChoice::trial_times() const {
  std::array<double, 2> times{};
  for (int way = 0; way < 2; ++way)
    times[way] = median(std::vector<double>(current_->trial[way].begin(), current_->trial[way].end()));
  return times;
}

void ReadChoice::agree(std::array<double, 2> slowest) { current_->read = slowest[1] < slowest[0]; }

}  // namespace copse
