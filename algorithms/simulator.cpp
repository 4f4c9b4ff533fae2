#include "algorithms/simulator.hpp"

#include <algorithm>
#include <bit>
#include <sstream>
#include <utility>

#include "algorithms/huge_pages.hpp"
#include "algorithms/lockstep_sim.hpp"
#include "algorithms/shift_sim.hpp"
#include "algorithms/step_cursor.hpp"

namespace copse {

namespace {

// One rank's progress through its schedule: what matching and a step's end
// read, in one cache line. The current step stays with the step source (a
// coroutine's frame, or a cursor that computes it again); matching reads only
// the peers, counts and ports cached here, so it touches two lines rather
// than two coroutine frames -- at p = 2^24 each access is a cache miss.
//
// The clock is RankClock's (common/cost_model.hpp) arithmetic, kept here so
// that it fits the line: `start` is both its step start and its `now` (they
// are equal from one step's begin_step to its end_step, and begin_step
// follows end_step at once); with unidirectional ports recv_port is the one
// port. The counts give three bits each to the flags.
struct alignas(64) RankState {
  Picos start = 0;     // the current step's start; once finished, the rank's finish
  Picos step_end = 0;  // the latest end of the step's transfers (the start if none)
  Picos send_port = 0, recv_port = 0;
  Picos work = 0;  // the step's local work (CostModel::step_work)
  std::uint64_t send_count : 61 = 0, send_open : 1 = 0, send_waiting : 1 = 0, send_first : 1 = 0;
  std::uint64_t recv_count : 61 = 0, recv_open : 1 = 0, recv_waiting : 1 = 0, finished : 1 = 0;
  std::int32_t send_peer = -1, recv_peer = -1;
};
static_assert(sizeof(RankState) == 64);

// What a rank's step touches only once: kept apart from the hot line.
struct RankTally {
  std::uint64_t steps = 0;  // steps begun
  std::uint64_t elements_received = 0;
};

// Each rank's steps from its coroutine: any plan. A rank's frames are freed
// the moment its schedule ends, not at the end of the run.
class CoroutineSteps {
 public:
  CoroutineSteps(const SchedulePlan& plan, int ranks) : schedules_(static_cast<std::size_t>(ranks)) {
    for (int r = 0; r < ranks; ++r) schedules_[static_cast<std::size_t>(r)] = plan(r);
  }
  // Moves rank r to its next step and sets `move` to it; false once its
  // schedule has ended.
  bool next(int r, StepMove& move) {
    auto& schedule = schedules_[static_cast<std::size_t>(r)];
    if (schedule.next()) {
      move = move_of(schedule.value());
      return true;
    }
    schedule = RankSchedule();
    return false;
  }
  const Step& step(int r) const { return schedules_[static_cast<std::size_t>(r)].value(); }
  void prefetch(int) const {}

 private:
  std::vector<RankSchedule> schedules_;
};

// Each rank's steps from a StepCursor (algorithms/step_cursor.hpp): four
// bytes a rank. A whole step (for hooks, a timeline or an error) is
// computed again.
class CursorSteps {
 public:
  CursorSteps(const StepCursor& cursor, int ranks)
      : cursor_(cursor), position_(static_cast<std::size_t>(ranks), kBefore) {}
  bool next(int r, StepMove& move) {
    auto& position = position_[static_cast<std::size_t>(r)];
    ++position;  // from kBefore to 0 at the first step
    return cursor_.seek_move(r, position, move);
  }
  Step step(int r) const { return cursor_.at(r, position_[static_cast<std::size_t>(r)]); }
  void prefetch(int r) const {
    __builtin_prefetch(&position_[static_cast<std::size_t>(r)], 1);
    cursor_.prefetch(r);
  }

 private:
  static constexpr std::uint32_t kBefore = ~std::uint32_t{0};  // no step begun yet
  const StepCursor& cursor_;
  HugeVector<std::uint32_t> position_;
};

// The model a run charges: `model` with the schedule's NicLoad when it shares
// interfaces (CostModel::for_schedule). Measuring the load runs every rank's
// schedule once more; when every node holds one rank no node has more than
// one off-node sender or receiver, so the share is 1 with or without it and
// the pass is skipped.
CostModel charged_model(const CostModel& model, const SchedulePlan& plan, int ranks, const RankMap& layout) {
  if (layout.nodes() == ranks) return model;
  return model.for_schedule(plan, ranks, layout);
}

// Whether a run is the plain case: bidirectional ports, every rank on a node
// of its own (every pair alike) with no measured interface share, no
// DataHooks and no Timeline.
bool plain_case(int ranks, const SimulationOptions& options, const DataHooks* hooks) {
  const bool own_nodes = !options.layout || options.layout->nodes() == ranks;
  return own_nodes && !options.model.nic_load() && !options.timeline && !hooks &&
         options.model.ports() == Ports::bidirectional;
}

// kPlain: the plain case, compiled apart -- bidirectional ports, every pair
// of ranks at one cost, no DataHooks and no Timeline -- so that each message
// pays for none of the other cases' tests.
template <class Steps, bool kPlain>
class Simulation {
 public:
  Simulation(const SchedulePlan& plan, int ranks, const SimulationOptions& options, DataHooks* hooks, Steps steps)
      : steps_(std::move(steps)),
        options_(options),
        layout_(options.layout ? *options.layout : RankMap::uniform(ranks, 0)),
        model_(charged_model(options.model, plan, ranks, layout_)),
        hooks_(hooks),
        bidirectional_(options.model.ports() == Ports::bidirectional),
        ranks_(static_cast<std::size_t>(ranks)),
        tally_(static_cast<std::size_t>(ranks)) {
    // Every rank on a node of its own and no measured interface share: every
    // pair costs the same, so each message skips the layout's lookups.
    if (ranks > 1 && layout_.nodes() == ranks && !model_.nic_load()) same_pair_ = model_.pair_cost(layout_, 0, 1);
    if constexpr (kPlain) pair_ = same_pair_.value_or(PairCost{});
    // arrive_at: a step of local work until the offset.
    if (!options.start.empty())
      for (int r = 0; r < ranks; ++r) at(r).start = options.start[static_cast<std::size_t>(r)];
  }

  SimulationResult run() {
    const int p = static_cast<int>(ranks_.size());
    woken_.assign((ranks_.size() + 63) / 64, 0);
    for (int r = 0; r < p; ++r) next_step(r);
    for (int r = 0; r < p; ++r) wake(r);
    sweep();
    if (pending_ > 0) depth_first();
    for (int r = 0; r < p; ++r)
      if (!at(r).finished) throw ScheduleError(deadlock_report());
    result_.finish.resize(ranks_.size());
    for (int r = 0; r < p; ++r) {
      const Picos finish = at(r).start;
      result_.finish[static_cast<std::size_t>(r)] = finish;
      result_.max_steps = std::max(result_.max_steps, tally_[static_cast<std::size_t>(r)].steps);
      result_.max_elements_received =
          std::max(result_.max_elements_received, tally_[static_cast<std::size_t>(r)].elements_received);
      if (finish > result_.time) result_.time = finish, result_.slowest_rank = r;
    }
    return std::move(result_);
  }

 private:
  bool bidirectional() const { return kPlain || bidirectional_; }
  Timeline* timeline() const { return kPlain ? nullptr : options_.timeline; }
  DataHooks* hooks() const { return kPlain ? nullptr : hooks_; }
  const PairCost& pair_cost(int src, int dst) {
    if constexpr (kPlain) return pair_;
    if (same_pair_) return *same_pair_;
    any_pair_ = model_.pair_cost(layout_, src, dst);
    return any_pair_;
  }

  RankState& at(int r) { return ranks_[static_cast<std::size_t>(r)]; }
  RankTally& tally(int r) { return tally_[static_cast<std::size_t>(r)]; }
  // RankClock::send_ready and recv_ready: with unidirectional ports the send
  // waits for the one port, recv_port.
  Picos send_ready(const RankState& st) const {
    return std::max(st.start, bidirectional() ? st.send_port : st.recv_port);
  }
  static Picos recv_ready(const RankState& st) { return std::max(st.start, st.recv_port); }

  // SimulationOptions::progress at most once per kProgressSteps steps
  // simulated.
  void report_progress() {
    static constexpr std::uint64_t kProgressSteps = std::uint64_t{1} << 20;
    if (!options_.progress || steps_begun_ < reported_steps_ + kProgressSteps) return;
    reported_steps_ = steps_begun_;
    options_.progress(finished_, ranks_.size());
  }

  // Woken ranks run in sweeps of ascending rank: a rank woken ahead of the
  // sweep runs later in the same sweep, one woken behind it in the next. Any
  // order gives the same times (see the header); this one reads the records
  // as a stream. In a pipelined tree every rank moves about one round a
  // sweep, and its nearest partners (most of them: children and parent sit
  // next to it in post order) are still in cache. A schedule whose work runs
  // against the sweep (a chain towards rank 0) would need a sweep per rank:
  // once a sweep finds less than one woken rank in kSparse words of the wake
  // set, the rest runs depth first, the last woken first, following the
  // partners of the transfer just matched.
  void wake(int r) {
    if (r == advancing_) {
      advance_again_ = true;
      return;
    }
    auto& word = woken_[static_cast<std::size_t>(r) / 64];
    const std::uint64_t bit = std::uint64_t{1} << (r % 64);
    if (word & bit) return;
    word |= bit;
    ++pending_;
    if (depth_first_) runnable_[runnable_size_++] = r;
  }

  void sweep() {
    static constexpr std::size_t kSparse = 16;
    // Woken ranks are taken kBatch words (512 ranks) at a time, so that their
    // cache misses overlap: first their own records are fetched, then each
    // begins what steps it can, which prefetches its partners' records, then
    // each posts, by when those records have arrived.
    static constexpr std::size_t kBatch = 8;
    while (pending_ > 0) {
      std::size_t visited = 0;
      for (std::size_t w = 0; w < woken_.size(); w += kBatch) {
        const std::size_t words = std::min(kBatch, woken_.size() - w);
        std::uint64_t bits[kBatch];
        // Calls f(rank) for each rank of the batch, lowest first.
        const auto each = [&](auto f) {
          for (std::size_t k = 0; k < words; ++k)
            for (std::uint64_t b = bits[k]; b; b &= b - 1) f(static_cast<int>((w + k) * 64) + std::countr_zero(b));
        };
        std::uint64_t any = 0;
        for (std::size_t k = 0; k < words; ++k) any |= bits[k] = std::exchange(woken_[w + k], 0);
        if (!any) continue;
        // (std::popcount is a library call without -mpopcnt: the ranks are
        // counted as they are visited.)
        each([&](int r) { prefetch(r), --pending_, ++visited; });
        each([&](int r) { begin_steps(r); });
        each([&](int r) { post_waiting(r); });
        // The ranks woken again: few, and in chains (a pair of partners
        // moving a step at a time) that rank by rank follows at once.
        while (any) {
          any = 0;
          for (std::size_t k = w; k < w + words; ++k)
            while (const std::uint64_t b = woken_[k]) {
              woken_[k] = b & (b - 1);
              --pending_, ++visited;
              advance(static_cast<int>(k * 64) + std::countr_zero(b));
              any = 1;
            }
        }
        report_progress();
      }
      if (visited * kSparse < woken_.size()) return;
    }
  }

  // What begin_steps reads of rank r.
  void prefetch(int r) {
    __builtin_prefetch(&at(r), 1);
    __builtin_prefetch(&tally(r), 1);
    steps_.prefetch(r);
  }

  void depth_first() {
    depth_first_ = true;
    // A rank is on the stack at most once (while its wake bit is set): p
    // places, left untouched (not faulted in) beyond the deepest the run goes.
    runnable_ = std::make_unique_for_overwrite<std::int32_t[]>(ranks_.size());
    for (std::size_t w = woken_.size(); w-- > 0;)
      for (std::uint64_t bits = woken_[w]; bits; bits &= ~(std::uint64_t{1} << (63 - std::countl_zero(bits))))
        runnable_[runnable_size_++] =
            static_cast<std::int32_t>(w * 64 + 63 - static_cast<std::size_t>(std::countl_zero(bits)));
    while (runnable_size_ > 0) {
      const int r = runnable_[--runnable_size_];
      woken_[static_cast<std::size_t>(r) / 64] &= ~(std::uint64_t{1} << (r % 64));
      --pending_;
      advance(r);
      report_progress();
    }
  }

  // Fetches and begins rank r's next step; its operations wait to be posted
  // (post_waiting), and the records of its partners are fetched meanwhile.
  void next_step(int r) {
    auto& st = at(r);
    StepMove m;
    if (!steps_.next(r, m)) {
      st.finished = true;
      ++finished_;
      return;
    }
    ++tally(r).steps;
    ++steps_begun_;
    st.step_end = st.start;  // RankClock::begin_step
    check_peer(r, m.send_peer, "sends to");
    check_peer(r, m.recv_peer, "receives from");
    if ((m.send_count | m.recv_count) >= kMostSimulatedElements) throw_too_long(r, m);
    st.send_peer = m.send_peer;
    st.recv_peer = m.recv_peer;
    // Each count beside its flag: one store a word.
    st.send_count = m.send_count;
    st.send_waiting = m.send_peer >= 0;
    st.recv_count = m.recv_count;
    st.recv_waiting = m.recv_peer >= 0;
    if (m.send_peer >= 0) __builtin_prefetch(&at(m.send_peer), 1);
    if (m.recv_peer >= 0) __builtin_prefetch(&at(m.recv_peer), 1);
    // Every receive posted is matched by the end of a run that does not
    // deadlock: counted here, on the receiver's own record.
    tally(r).elements_received += m.recv_count;
    st.work = options_.model.step_work(m.work_elements, m.recv_peer >= 0, options_.element_bytes);
    if (!bidirectional()) {
      Step peers;
      peers.send.peer = m.send_peer;
      peers.recv.peer = m.recv_peer;
      st.send_first = send_goes_first(r, peers);
    }
  }

  // Posts what rank r's step has waiting: with bidirectional ports all of
  // it, with unidirectional ones the next operation once none is open.
  void post_waiting(int r) {
    if (!bidirectional()) return post_next_unidirectional(r);
    auto& st = at(r);
    if (st.send_waiting) st.send_waiting = false, post_send(r);
    if (st.recv_waiting) st.recv_waiting = false, post_recv(r);
  }

  // Unidirectional ports: one operation at a time, in the agreed order.
  void post_next_unidirectional(int r) {
    auto& st = at(r);
    if (st.send_open || st.recv_open) return;
    if (st.send_waiting && (st.send_first || !st.recv_waiting)) {
      st.send_waiting = false;
      post_send(r);
    } else if (st.recv_waiting) {
      st.recv_waiting = false;
      post_recv(r);
    }
  }

  void post_send(int r) {
    auto& st = at(r);
    st.send_open = true;
    try_match(r, st.send_peer);
  }

  void post_recv(int r) {
    auto& st = at(r);
    st.recv_open = true;
    try_match(st.recv_peer, r);
  }

  void try_match(int src, int dst) {
    auto& s = at(src);
    auto& d = at(dst);
    if (!s.send_open || !d.recv_open || s.send_peer != dst || d.recv_peer != src) return;
    if (s.send_count != d.recv_count) throw_size_mismatch(src, dst);
    // A posted operation's ready time cannot change before it is matched: its
    // port and step start are fixed once it is posted.
    const std::uint64_t count = s.send_count;
    const std::uint64_t bytes = count * options_.element_bytes;
    const TransferEnds ends = pair_cost(src, dst).ends(bytes, send_ready(s), recv_ready(d));
    if (timeline()) record_transfer(src, dst, bytes, ends);
    if (hooks())
      hooks_->on_transfer(src, tally(src).steps - 1, steps_.step(src).send, dst, tally(dst).steps - 1,
                          steps_.step(dst));
    s.send_open = false;
    (bidirectional() ? s.send_port : s.recv_port) = ends.send_end;  // RankClock::send_done
    s.step_end = std::max(s.step_end, ends.send_end);
    d.recv_open = false;
    d.recv_port = ends.recv_end;  // RankClock::recv_done
    d.step_end = std::max(d.step_end, ends.recv_end);
    ++result_.messages;
    result_.elements_moved += count;
    // A side with its other operation still open has nothing to do until
    // that one is matched too, and is woken then: woken now, its visit would
    // fetch its record for nothing (two-tree at p = 2^18: 29 M visits for
    // 18 M steps, 22 M without them).
    if (!s.recv_open) wake(src);
    if (!d.send_open) wake(dst);
  }

  [[noreturn, gnu::noinline]] void throw_size_mismatch(int src, int dst) {
    const Transfer send = steps_.step(src).send;
    const Transfer recv = steps_.step(dst).recv;
    std::ostringstream m;
    m << "size mismatch: rank " << src << " step " << tally(src).steps - 1 << " sends " << send.count
      << " elements (from element " << send.offset << ") to rank " << dst << ", whose step " << tally(dst).steps - 1
      << " receives " << recv.count << " elements (into element " << recv.offset << ")";
    throw ScheduleError(m.str());
  }

  [[noreturn, gnu::noinline]] void throw_too_long(int r, const StepMove& s) {
    std::ostringstream m;
    m << "rank " << r << " step " << tally(r).steps - 1 << " moves " << std::max(s.send_count, s.recv_count)
      << " elements, more than the simulator counts (2^61)";
    throw ScheduleError(m.str());
  }

  // Runs rank r forward: ends what steps it has done and posts the next.
  // Were that step done at once, its match has woken r again. In a sweep r
  // then waits in the wake set for the batch's ascending pass: run on at
  // once, it left the sweep's stream of records (dual-root at 2^22 took 50%
  // longer). Depth first, where most matches are of the rank being
  // advanced, it goes on at once rather than through the stack.
  void advance(int r) {
    if (depth_first_) advancing_ = r;
    do {
      advance_again_ = false;
      begin_steps(r);
      post_waiting(r);
    } while (advance_again_);
    advancing_ = -1;
  }

  // Ends rank r's steps while they are done, up to one with operations to
  // post (or the end of its schedule).
  void begin_steps(int r) {
    auto& st = at(r);
    while (!st.finished) {
      if (st.send_open || st.recv_open || st.send_waiting || st.recv_waiting) return;
      if (hooks()) hooks_->on_step_end(r, tally(r).steps - 1, steps_.step(r));
      st.start = st.step_end + st.work;  // RankClock::end_step, then begin_step's start
      if (timeline() && r < options_.timeline_ranks)
        add_local_work(*options_.timeline, r, tally(r).steps - 1, steps_.step(r), st.start - st.work, st.start);
      next_step(r);
    }
  }

  // Both sides' bars of a matched transfer (algorithms/timeline.hpp), before
  // the clocks move on.
  void record_transfer(int src, int dst, std::uint64_t bytes, const TransferEnds& ends) {
    const Picos busy = transfer_busy(model_, layout_, src, dst, bytes);
    auto& s = at(src);
    auto& d = at(dst);
    Timeline& out = *options_.timeline;
    if (src < options_.timeline_ranks)
      out.push_back(TimelineEvent{src, Activity::send, dst, tally(src).steps - 1, steps_.step(src).send.offset,
                                  s.send_count, bar_start(send_ready(s), ends.send_end, busy), ends.send_end, 0, 0});
    if (dst < options_.timeline_ranks)
      out.push_back(TimelineEvent{dst, Activity::recv, src, tally(dst).steps - 1, steps_.step(dst).recv.offset,
                                  d.recv_count, bar_start(recv_ready(d), ends.recv_end, busy), ends.recv_end, 0, 0});
  }

  void check_peer(int r, int peer, const char* verb) const {
    if (peer >= 0 && (peer >= static_cast<int>(ranks_.size()) || peer == r)) throw_bad_peer(r, peer, verb);
  }

  // The error paths stay out of line: their streams would otherwise widen
  // the hot functions' frames.
  [[noreturn, gnu::noinline]] void throw_bad_peer(int r, int peer, const char* verb) const {
    const auto p = static_cast<int>(ranks_.size());
    std::ostringstream m;
    m << "rank " << r << " step " << tally_[static_cast<std::size_t>(r)].steps - 1 << " " << verb << " rank " << peer
      << ", which is " << (peer == r ? "itself" : "not a rank") << " (p = " << p << ")";
    throw ScheduleError(m.str());
  }

  std::string deadlock_report() const {
    std::ostringstream m;
    m << "deadlock:";
    int shown = 0, blocked = 0;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const auto& st = ranks_[r];
      if (st.finished) continue;
      ++blocked;
      if (shown++ >= 4) continue;
      const Step& s = steps_.step(static_cast<int>(r));
      m << " rank " << r << " is stuck in step " << tally_[r].steps - 1 << " (";
      if (st.send_open || st.send_waiting) m << "sending " << s.send.count << " elements to rank " << s.send.peer;
      if ((st.send_open || st.send_waiting) && (st.recv_open || st.recv_waiting)) m << ", ";
      if (st.recv_open || st.recv_waiting) m << "receiving " << s.recv.count << " elements from rank " << s.recv.peer;
      m << ");";
    }
    m << " " << blocked << " rank(s) blocked in all";
    return m.str();
  }

  Steps steps_;
  const SimulationOptions& options_;
  RankMap layout_;   // options_.layout, or every rank on a node of its own
  CostModel model_;  // options_.model, with the schedule's NicLoad if it shares interfaces
  DataHooks* hooks_;
  bool bidirectional_;
  std::optional<PairCost> same_pair_;  // when every pair of ranks costs the same
  PairCost pair_;                      // kPlain: *same_pair_
  PairCost any_pair_;                  // otherwise: the pair matched last
  HugeVector<RankState> ranks_;
  HugeVector<RankTally> tally_;
  HugeVector<std::uint64_t> woken_;           // ranks that may be able to progress: a bit each
  std::uint64_t pending_ = 0;                 // bits set in woken_
  bool depth_first_ = false;                  // woken ranks go to runnable_ as well
  std::unique_ptr<std::int32_t[]> runnable_;  // depth first: a stack of the woken ranks, the last woken on top
  std::size_t runnable_size_ = 0;
  int advancing_ = -1;                // depth first: the rank advance() runs, which wake() leaves to it
  bool advance_again_ = false;        // a match woke advancing_
  std::uint64_t finished_ = 0;        // ranks whose schedule has ended
  std::uint64_t steps_begun_ = 0;     // by all ranks
  std::uint64_t reported_steps_ = 0;  // steps_begun_ at the last progress report
  SimulationResult result_;
};

// What every pair of ranks costs in the plain case (the cost of 0 to 1, as
// Simulation takes it).
PairCost plain_pair(int ranks, const SimulationOptions& options) {
  if (ranks < 2) return PairCost{};
  if (options.layout) return options.model.pair_cost(*options.layout, 0, 1);
  return options.model.pair_cost(RankMap::uniform(ranks, 0), 0, 1);
}

}  // namespace

void check_start_offsets(const std::vector<Picos>& start, int ranks) {
  if (!start.empty() && start.size() != static_cast<std::size_t>(ranks))
    throw UsageError("arrival offsets: " + std::to_string(start.size()) + " given for " + std::to_string(ranks) +
                     " ranks");
  for (std::size_t r = 0; r < start.size(); ++r)
    if (start[r] < 0)
      throw UsageError("arrival offsets: rank " + std::to_string(r) + " arrives at a negative time (" +
                       std::to_string(start[r]) + " ps)");
}

std::shared_ptr<const PlanHints> planning_hints(const SimulationOptions& options,
                                                std::vector<Picos> predicted_arrival) {
  auto hints = std::make_shared<PlanHints>();
  hints->model = std::make_shared<const CostModel>(options.model);
  hints->element_bytes = options.element_bytes;
  hints->arrival = std::move(predicted_arrival);
  return hints;
}

// simulate_shift is exact when every rank is charged alike and all start
// together (algorithms/shift_plan.hpp says why); the lockstep run when every
// rank is charged alike (lockstep_sim.hpp).
SimulationEngine simulation_engine(const SchedulePlan& plan, const RunTraits& run) {
  if (shift_plan_of(plan) && run.plain && !run.offsets) return SimulationEngine::shift_profile;
  const StepCursor* cursor = cursor_of(plan);
  if (cursor && cursor->lockstep() && run.plain) return SimulationEngine::lockstep;
  return cursor ? SimulationEngine::cursor : SimulationEngine::coroutines;
}

// Rank by rank: the record, the tally, the finish time, the wake bit and a
// place on the depth-first stack (reserved, if not touched). The shift
// profile holds the finish times alone (its runs are a few, whatever p);
// the lockstep run a record and, at its end, the finish time.
std::size_t simulator_bytes_per_rank(SimulationEngine engine) {
  switch (engine) {
    case SimulationEngine::shift_profile: return sizeof(Picos);
    case SimulationEngine::lockstep: return lockstep_bytes_per_rank();
    case SimulationEngine::cursor:
    case SimulationEngine::coroutines: break;
  }
  return sizeof(RankState) + sizeof(RankTally) + sizeof(Picos) + 1 + sizeof(std::int32_t);
}

SimulationResult simulate(const SchedulePlan& plan, int ranks, const SimulationOptions& options, DataHooks* hooks) {
  if (ranks < 1) throw ScheduleError("simulate: at least one rank is needed");
  if (options.layout && options.layout->ranks() != ranks)
    throw ScheduleError("simulate: the rank map covers " + std::to_string(options.layout->ranks()) + " ranks, not " +
                        std::to_string(ranks));
  check_start_offsets(options.start, ranks);
  const bool plain = plain_case(ranks, options, hooks);
  switch (simulation_engine(plan, RunTraits{plain, !options.start.empty()})) {
    case SimulationEngine::shift_profile: return simulate_shift(*shift_plan_of(plan), ranks, options);
    case SimulationEngine::lockstep:
      if (auto result = simulate_lockstep(*cursor_of(plan)->lockstep(), ranks, options, plain_pair(ranks, options)))
        return std::move(*result);
      break;  // a broken promise: step by step, which names the fault
    case SimulationEngine::cursor:
    case SimulationEngine::coroutines: break;
  }
  const auto run = [&]<bool kPlain>() {
    if (const StepCursor* cursor = cursor_of(plan))
      return Simulation<CursorSteps, kPlain>(plan, ranks, options, hooks, CursorSteps(*cursor, ranks)).run();
    return Simulation<CoroutineSteps, kPlain>(plan, ranks, options, hooks, CoroutineSteps(plan, ranks)).run();
  };
  return plain ? run.template operator()<true>() : run.template operator()<false>();
}

}  // namespace copse
