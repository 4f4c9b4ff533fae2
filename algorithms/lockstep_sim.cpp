#include "algorithms/lockstep_sim.hpp"

#include <algorithm>
#include <utility>
#include <vector>

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

// A rank's part of the run, in one record (two a cache line), so that a
// step reads and writes one line of its own and one of each partner's: its
// clock, and the clock it had before the position that last moved it --
// what a partner at that same position must read, whether the rank's own
// visit came first or not.
struct LockstepRank {
  static constexpr std::uint32_t kNever = ~std::uint32_t{0};  // above every position
  Picos now = 0;
  Picos before = 0;  // `now` before position `moved`
  std::uint32_t moved = kNever;
  std::uint32_t steps = 0;  // steps taken (positions fit 32 bits)
  std::uint64_t received = 0;
  Picos clock_before(std::uint32_t at) const { return moved == at ? before : now; }
};
static_assert(sizeof(LockstepRank) == 32);

class LockstepRun {
 public:
  LockstepRun(const LockstepMoves& moves, int ranks, const SimulationOptions& options, const PairCost& pair)
      : moves_(moves),
        options_(options),
        pair_(pair),
        ranks_(ranks),
        rank_of_place_(moves.rank_of_place()),
        state_(static_cast<std::size_t>(ranks)) {
    // arrive_at: each rank's clock starts at its offset, its ports free.
    if (!options.start.empty())
      for (std::size_t q = 0; q < state_.size(); ++q) state_[q].now = options.start[rank_of(q)];
  }

  // False if the schedule broke its promise (lockstep_sim.hpp).
  bool run() {
    const std::uint32_t positions = moves_.positions();
    for (std::uint32_t at = 0; at < positions; ++at) {
      const std::vector<std::int32_t>* ranks = moves_.ranks_at(at);
      if (!(ranks ? run_position_of(at, *ranks) : run_position(at))) return false;
      report_progress(at + 1, positions);
    }
    return true;
  }

  SimulationResult result() {
    result_.finish.resize(state_.size());
    for (std::size_t q = 0; q < state_.size(); ++q) {
      const LockstepRank& x = state_[q];
      result_.max_steps = std::max<std::uint64_t>(result_.max_steps, x.steps);
      result_.max_elements_received = std::max(result_.max_elements_received, x.received);
      result_.finish[rank_of(q)] = x.now;
    }
    for (std::size_t r = 0; r < result_.finish.size(); ++r)
      if (result_.finish[r] > result_.time)
        result_.time = result_.finish[r], result_.slowest_rank = static_cast<int>(r);
    return std::move(result_);
  }

 private:
  // Ranks whose moves are fetched at once: their partners' records are
  // prefetched together, so that those cache misses overlap.
  static constexpr int kBatch = 256;

  bool run_position(std::uint32_t at) {
    unmatched_ = 0;
    for (int first = 0; first < ranks_; first += kBatch) {
      const int count = std::min(kBatch, ranks_ - first);
      moves_.moves_at(at, first, count, batch_);
      for (int i = 0; i < count; ++i) {
        prefetch(batch_[i].send_peer);
        prefetch(batch_[i].recv_peer);
      }
      for (int i = 0; i < count; ++i)
        if (!visit(at, first + i, batch_[i])) return false;
    }
    return unmatched_ == 0;
  }

  // A position whose steps are those of `ranks` alone (LockstepMoves::
  // ranks_at); every other rank's clock stays.
  bool run_position_of(std::uint32_t at, const std::vector<std::int32_t>& ranks) {
    unmatched_ = 0;
    const auto n = static_cast<int>(ranks.size());
    for (int first = 0; first < n; first += kBatch) {
      const int count = std::min(kBatch, n - first);
      const std::int32_t* batch_ranks = ranks.data() + first;
      moves_.moves_of(at, batch_ranks, count, batch_);
      for (int i = 0; i < count; ++i) {
        prefetch(batch_ranks[i]);
        prefetch(batch_[i].send_peer);
        prefetch(batch_[i].recv_peer);
      }
      for (int i = 0; i < count; ++i) {
        const int r = batch_ranks[i];
        if (static_cast<unsigned>(r) >= static_cast<unsigned>(ranks_) || !visit(at, r, batch_[i])) return false;
      }
    }
    return unmatched_ == 0;
  }

  void prefetch(int r) const {
    if (static_cast<unsigned>(r) < static_cast<unsigned>(ranks_)) __builtin_prefetch(&state_[to_size(r)], 1);
  }

  // Rank r's step at position `at`, if it has one. The step-by-step run's
  // arithmetic (simulator.cpp's try_match and begin_steps), with each
  // transfer's ends computed on both sides from the two clocks before the
  // position.
  [[gnu::always_inline]] bool visit(std::uint32_t at, int r, const StepMove& m) {
    const bool sends = m.send_peer >= 0, receives = m.recv_peer >= 0;
    if (!sends && !receives && m.work_elements == 0) return true;  // a void slot: the clock stays
    if (!valid_peer(r, m.send_peer) || !valid_peer(r, m.recv_peer) ||
        (m.send_count | m.recv_count) >= kMostSimulatedElements)
      return false;
    LockstepRank& me = state_[to_size(r)];
    const Picos start = me.clock_before(at);
    const std::uint64_t element_bytes = options_.element_bytes;
    Picos end = start;
    if (sends) {
      const Picos peer = state_[to_size(m.send_peer)].clock_before(at);
      end = std::max(end, pair_.ends(m.send_count * element_bytes, start, peer).send_end);
      unmatched_ += transfer_key(r, m.send_peer, m.send_count);
      ++result_.messages;
      result_.elements_moved += m.send_count;
    }
    if (receives) {
      const Picos peer = state_[to_size(m.recv_peer)].clock_before(at);
      end = std::max(end, pair_.ends(m.recv_count * element_bytes, peer, start).recv_end);
      unmatched_ -= transfer_key(m.recv_peer, r, m.recv_count);
      me.received += m.recv_count;
    }
    me.before = start;
    me.now = end + options_.model.step_work(m.work_elements, receives, element_bytes);
    me.moved = at;
    ++me.steps;
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
  std::size_t rank_of(std::size_t place) const { return rank_of_place_ ? to_size((*rank_of_place_)[place]) : place; }

  const LockstepMoves& moves_;
  const SimulationOptions& options_;
  PairCost pair_;
  int ranks_;
  const std::vector<std::int32_t>* rank_of_place_;  // null: places are ranks
  HugeVector<LockstepRank> state_;                  // by place
  StepMove batch_[kBatch];
  std::uint64_t unmatched_ = 0;  // the position's send keys less its receive keys
  std::uint64_t steps_begun_ = 0, reported_steps_ = 0;
  SimulationResult result_;
};

}  // namespace

std::size_t lockstep_bytes_per_rank() { return sizeof(LockstepRank) + sizeof(Picos); }

std::optional<SimulationResult> simulate_lockstep(const LockstepMoves& moves, int ranks,
                                                  const SimulationOptions& options, const PairCost& pair) {
  LockstepRun run(moves, ranks, options, pair);
  if (!run.run()) return std::nullopt;
  return run.result();
}

}  // namespace copse
