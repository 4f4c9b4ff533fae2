#include "algorithms/lockstep_sim.hpp"

#include <algorithm>
#include <utility>

#include "algorithms/huge_pages.hpp"

namespace copse {

namespace {

// splitmix64's finaliser: every bit of x moves about half the bits out.
std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A transfer as the matching check sees it. A position's sends add their
// keys and its receives take theirs away: the sum is zero when they pair up,
// and otherwise is zero only by a chance of about 2^-64.
std::uint64_t transfer_key(int src, int dst, std::uint64_t count) {
  const std::uint64_t pair = (std::uint64_t{static_cast<std::uint32_t>(src)} << 32) | static_cast<std::uint32_t>(dst);
  return mix(pair ^ (count * 0x9e3779b97f4a7c15ull));
}

class LockstepRun {
 public:
  LockstepRun(const LockstepMoves& moves, int ranks, const SimulationOptions& options, const PairCost& pair)
      : moves_(moves),
        options_(options),
        pair_(pair),
        ranks_(ranks),
        before_(static_cast<std::size_t>(ranks), 0),
        after_(static_cast<std::size_t>(ranks), 0),
        steps_(static_cast<std::size_t>(ranks), 0),
        received_(static_cast<std::size_t>(ranks), 0) {
    // arrive_at: each rank's clock starts at its offset, its ports free.
    if (!options.start.empty()) std::copy(options.start.begin(), options.start.end(), before_.begin());
  }

  // False if the schedule broke its promise (lockstep_sim.hpp).
  bool run() {
    const std::uint32_t positions = moves_.positions();
    for (std::uint32_t at = 0; at < positions; ++at) {
      if (!run_position(at)) return false;
      std::swap(before_, after_);
      report_progress(at + 1, positions);
    }
    return true;
  }

  SimulationResult result() {
    after_ = HugeVector<Picos>();  // freed: the peak stays that of the run
    for (std::size_t r = 0; r < before_.size(); ++r) {
      result_.max_steps = std::max<std::uint64_t>(result_.max_steps, steps_[r]);
      result_.max_elements_received = std::max(result_.max_elements_received, received_[r]);
    }
    steps_ = HugeVector<std::uint32_t>();
    received_ = HugeVector<std::uint64_t>();
    result_.finish.assign(before_.begin(), before_.end());
    for (std::size_t r = 0; r < result_.finish.size(); ++r)
      if (result_.finish[r] > result_.time)
        result_.time = result_.finish[r], result_.slowest_rank = static_cast<int>(r);
    return std::move(result_);
  }

 private:
  // Ranks whose moves are fetched at once: their partners' clocks are
  // prefetched together, so that those cache misses overlap.
  static constexpr int kBatch = 256;

  bool run_position(std::uint32_t at) {
    unmatched_ = 0;
    for (int first = 0; first < ranks_; first += kBatch) {
      const int count = std::min(kBatch, ranks_ - first);
      moves_.moves_at(at, first, count, batch_);
      for (int i = 0; i < count; ++i) {
        prefetch_clock(batch_[i].send_peer);
        prefetch_clock(batch_[i].recv_peer);
      }
      for (int i = 0; i < count; ++i)
        if (!visit(first + i, batch_[i])) return false;
    }
    return unmatched_ == 0;
  }

  void prefetch_clock(int peer) const {
    if (static_cast<unsigned>(peer) < static_cast<unsigned>(ranks_)) __builtin_prefetch(&before_[to_size(peer)]);
  }

  // Rank r's step at this position, if it has one: its clock after it. The
  // step-by-step run's arithmetic (simulator.cpp's try_match and
  // begin_steps), with each transfer's ends computed on both sides.
  [[gnu::always_inline]] bool visit(int r, const StepMove& m) {
    const Picos start = before_[to_size(r)];
    const bool sends = m.send_peer >= 0, receives = m.recv_peer >= 0;
    if (!sends && !receives && m.work_elements == 0) {
      after_[to_size(r)] = start;
      return true;
    }
    if (!valid_peer(r, m.send_peer) || !valid_peer(r, m.recv_peer) ||
        (m.send_count | m.recv_count) >= kMostSimulatedElements)
      return false;
    const std::uint64_t element_bytes = options_.element_bytes;
    Picos end = start;
    if (sends) {
      end = std::max(end, pair_.ends(m.send_count * element_bytes, start, before_[to_size(m.send_peer)]).send_end);
      unmatched_ += transfer_key(r, m.send_peer, m.send_count);
      ++result_.messages;
      result_.elements_moved += m.send_count;
    }
    if (receives) {
      end = std::max(end, pair_.ends(m.recv_count * element_bytes, before_[to_size(m.recv_peer)], start).recv_end);
      unmatched_ -= transfer_key(m.recv_peer, r, m.recv_count);
      received_[to_size(r)] += m.recv_count;
    }
    after_[to_size(r)] = end + options_.model.step_work(m.work_elements, receives, element_bytes);
    ++steps_[to_size(r)];
    ++steps_begun_;
    return true;
  }

  bool valid_peer(int r, int peer) const { return peer < ranks_ && peer != r; }

  // SimulationOptions::progress at most once per 2^20 steps. Ranks finish
  // nearly together here, so the share of positions run stands for the
  // share of ranks finished.
  void report_progress(std::uint32_t done, std::uint32_t positions) {
    static constexpr std::uint64_t kProgressSteps = std::uint64_t{1} << 20;
    if (!options_.progress || steps_begun_ < reported_steps_ + kProgressSteps) return;
    reported_steps_ = steps_begun_;
    const auto p = static_cast<std::uint64_t>(ranks_);
    options_.progress(p * done / positions, p);
  }

  static std::size_t to_size(int r) { return static_cast<std::size_t>(r); }

  const LockstepMoves& moves_;
  const SimulationOptions& options_;
  PairCost pair_;
  int ranks_;
  HugeVector<Picos> before_, after_;  // each rank's clock before and after the position run
  HugeVector<std::uint32_t> steps_;   // steps taken (positions fit 32 bits)
  HugeVector<std::uint64_t> received_;
  StepMove batch_[kBatch];
  std::uint64_t unmatched_ = 0;  // the position's send keys less its receive keys
  std::uint64_t steps_begun_ = 0, reported_steps_ = 0;
  SimulationResult result_;
};

}  // namespace

std::optional<SimulationResult> simulate_lockstep(const LockstepMoves& moves, int ranks,
                                                  const SimulationOptions& options, const PairCost& pair) {
  LockstepRun run(moves, ranks, options, pair);
  if (!run.run()) return std::nullopt;
  return run.result();
}

}  // namespace copse
