#include "internode/executor.hpp"

#include <sstream>

namespace copse {

namespace {

// One rank's progress through its schedule. The current step is referenced in
// the generator (valid until the generator resumes), never copied, which keeps
// a rank at a few dozen bytes plus its coroutine frame: p = 2^20 fits.
struct RankState {
  RankSchedule schedule;
  RankClock clock;
  std::uint64_t steps = 0;  // steps begun
  Picos send_ready = 0, recv_ready = 0;
  bool send_open = false, recv_open = false;        // posted, not yet matched
  bool send_waiting = false, recv_waiting = false;  // unidirectional: not yet posted
  bool finished = false;
  const Step& step() const { return schedule.value(); }
};

class Executor {
 public:
  Executor(const SchedulePlan& plan, int ranks, const ExecutionOptions& options, DataHooks* hooks)
      : options_(options), hooks_(hooks), ranks_(static_cast<std::size_t>(ranks)) {
    for (int r = 0; r < ranks; ++r) {
      auto& st = at(r);
      st.schedule = plan(r);
      st.clock = RankClock(options.model.ports());
    }
    result_.finish.assign(ranks_.size(), 0);
  }

  ExecutionResult run() {
    const int p = static_cast<int>(ranks_.size());
    for (int r = 0; r < p; ++r) next_step(r);
    for (int r = 0; r < p; ++r) work_.push_back(r);
    while (!work_.empty()) {
      const int r = work_.back();
      work_.pop_back();
      advance(r);
    }
    for (int r = 0; r < p; ++r)
      if (!at(r).finished) throw ScheduleError(deadlock_report());
    for (int r = 0; r < p; ++r) {
      result_.finish[static_cast<std::size_t>(r)] = at(r).clock.now();
      result_.max_steps = std::max(result_.max_steps, at(r).steps);
      if (at(r).clock.now() > result_.time) result_.time = at(r).clock.now(), result_.slowest_rank = r;
    }
    return std::move(result_);
  }

 private:
  RankState& at(int r) { return ranks_[static_cast<std::size_t>(r)]; }

  // Fetches and begins rank r's next step, posting what can be posted.
  void next_step(int r) {
    auto& st = at(r);
    if (!st.schedule.next()) {
      st.finished = true;
      return;
    }
    ++st.steps;
    st.clock.begin_step();
    const Step& s = st.step();
    check_peer(r, s.send, "sends to");
    check_peer(r, s.recv, "receives from");
    if (options_.model.ports() == Ports::bidirectional) {
      if (s.send) post_send(r);
      if (s.recv) post_recv(r);
    } else {
      st.send_waiting = static_cast<bool>(s.send);
      st.recv_waiting = static_cast<bool>(s.recv);
      post_next_unidirectional(r);
    }
  }

  // Unidirectional ports: one operation at a time, in the agreed order.
  void post_next_unidirectional(int r) {
    auto& st = at(r);
    if (st.send_open || st.recv_open) return;
    const bool send_first = send_goes_first(r, st.step());
    if (st.send_waiting && (send_first || !st.recv_waiting)) {
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
    st.send_ready = st.clock.send_ready();
    try_match(r, st.step().send.peer);
  }

  void post_recv(int r) {
    auto& st = at(r);
    st.recv_open = true;
    st.recv_ready = st.clock.recv_ready();
    try_match(st.step().recv.peer, r);
  }

  void try_match(int src, int dst) {
    auto& s = at(src);
    auto& d = at(dst);
    if (!s.send_open || !d.recv_open || s.step().send.peer != dst || d.step().recv.peer != src) return;
    const Transfer& send = s.step().send;
    const Transfer& recv = d.step().recv;
    if (send.count != recv.count) {
      std::ostringstream m;
      m << "size mismatch: rank " << src << " step " << s.steps - 1 << " sends " << send.count
        << " elements (from element " << send.offset << ") to rank " << dst << ", whose step " << d.steps - 1
        << " receives " << recv.count << " elements (into element " << recv.offset << ")";
      throw ScheduleError(m.str());
    }
    const int level = link_level(src, dst, options_.ranks_per_node);
    const Picos end = transfer_end(s.send_ready, d.recv_ready,
                                   options_.model.transfer(level, send.count * options_.element_bytes));
    if (hooks_) hooks_->on_transfer(src, s.steps - 1, send, dst, d.steps - 1, d.step());
    s.send_open = false;
    s.clock.send_done(end);
    d.recv_open = false;
    d.clock.recv_done(end);
    ++result_.messages;
    result_.elements_moved += send.count;
    work_.push_back(src);
    work_.push_back(dst);
  }

  // Runs rank r forward until it blocks or finishes.
  void advance(int r) {
    auto& st = at(r);
    while (!st.finished) {
      if (options_.model.ports() == Ports::unidirectional) post_next_unidirectional(r);
      if (st.send_open || st.recv_open || st.send_waiting || st.recv_waiting) return;
      const Step& s = st.step();
      if (hooks_) hooks_->on_step_end(r, st.steps - 1, s);
      st.clock.end_step(options_.model.combine(local_work_elements(s) * options_.element_bytes));
      next_step(r);
    }
  }

  void check_peer(int r, const Transfer& t, const char* verb) const {
    if (!t) return;
    const auto p = static_cast<int>(ranks_.size());
    if (t.peer >= p || t.peer == r) {
      std::ostringstream m;
      m << "rank " << r << " step " << ranks_[static_cast<std::size_t>(r)].steps - 1 << " " << verb
        << " rank " << t.peer << ", which is " << (t.peer == r ? "itself" : "not a rank") << " (p = " << p << ")";
      throw ScheduleError(m.str());
    }
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
      const Step& s = st.step();
      m << " rank " << r << " is stuck in step " << st.steps - 1 << " (";
      if (st.send_open || st.send_waiting) m << "sending " << s.send.count << " elements to rank " << s.send.peer;
      if ((st.send_open || st.send_waiting) && (st.recv_open || st.recv_waiting)) m << ", ";
      if (st.recv_open || st.recv_waiting) m << "receiving " << s.recv.count << " elements from rank " << s.recv.peer;
      m << ");";
    }
    m << " " << blocked << " rank(s) blocked in all";
    return m.str();
  }

  const ExecutionOptions& options_;
  DataHooks* hooks_;
  std::vector<RankState> ranks_;
  std::vector<int> work_;
  ExecutionResult result_;
};

}  // namespace

ExecutionResult execute(const SchedulePlan& plan, int ranks, const ExecutionOptions& options, DataHooks* hooks) {
  if (ranks < 1) throw ScheduleError("execute: at least one rank is needed");
  return Executor(plan, ranks, options, hooks).run();
}

}  // namespace copse
