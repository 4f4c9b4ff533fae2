#include "exec/step_executor.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "algorithms/timeline.hpp"
#include "common/error.hpp"

namespace copse {

// ---- compiling a rank's steps -------------------------------------------------

std::uint64_t compile_steps(const SchedulePlan& plan, int r, int p, std::uint64_t n, std::vector<Step>& out,
                            const CombinesInPlace& in_place) {
  auto in_range = [n](std::uint64_t offset, std::uint64_t count) { return offset <= n && count <= n - offset; };
  std::uint64_t scratch = 0;
  RankSchedule schedule = plan(r);
  std::uint64_t index = 0;
  while (schedule.next()) {
    const Step& s = schedule.value();
    auto bad = [&](const std::string& what) {
      std::ostringstream m;
      m << "rank " << r << " step " << index << " " << what;
      throw ScheduleError(m.str());
    };
    for (const Transfer* t : {&s.send, &s.recv}) {
      if (!*t) continue;
      const char* verb = t == &s.send ? "sends to" : "receives from";
      if (t->peer >= p || t->peer == r)
        bad(std::string(verb) + " rank " + std::to_string(t->peer) + ", which is " +
            (t->peer == r ? "itself" : "not a rank") + " (p = " + std::to_string(p) + ")");
      if (!in_range(t->offset, t->count))
        bad(std::string(t == &s.send ? "sends" : "receives into") + " elements [" + std::to_string(t->offset) + ", " +
            std::to_string(t->offset + t->count) + ") of a " + std::to_string(n) + "-element vector");
    }
    if (s.copy.count > 0 && (!in_range(s.copy.from, s.copy.count) || !in_range(s.copy.to, s.copy.count)))
      bad("copies " + std::to_string(s.copy.count) + " elements from " + std::to_string(s.copy.from) + " to " +
          std::to_string(s.copy.to) + " in a " + std::to_string(n) + "-element vector");
    // Room for the most a run stages (a send that goes first, under the
    // virtual clock's one-port rule, spares the overlap's staging).
    if (s.recv && stages_receive(s, !in_place || in_place(s.recv.peer))) scratch = std::max(scratch, s.recv.count);
    out.push_back(s);
    ++index;
  }
  return scratch;
}

// ---- running them -------------------------------------------------------------

Link* StepExecutor::link_between(int rank, int peer) const {
  return config_.layout.shares_memory(rank, peer) ? static_cast<Link*>(local_) : remote_;
}

bool StepExecutor::combines_in_place(int rank, int peer) const {
  const Link* link = link_between(rank, peer);
  return !link || link->combines_in_place();  // no link: the run fails at that step anyway
}

Link& StepExecutor::link_to(const LinkRank& c, int peer) const {
  if (Link* link = link_between(c.rank, peer)) return *link;
  const bool shared = config_.layout.shares_memory(c.rank, peer);
  throw ScheduleError(config_.layout.describe(c.rank) + " step " + std::to_string(c.step) + " has no link to " +
                      config_.layout.describe(peer) +
                      (shared ? ", which shares memory with it" : ", which shares no memory with it"));
}

namespace {

std::int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A rank's timeline while it runs (StepExecutor::run's `timeline`): each
// operation is noted when posted (its port's ready time, the wall clock, in
// the StepRun, which outlives a pause between advances) and recorded when done.
class Recorder {
 public:
  Recorder(StepRun& r, const ExecutorConfig& config, const LinkRank& c) : r_(r), config_(config), c_(c) {}
  explicit operator bool() const { return r_.timeline != nullptr; }
  void posting_send() { r_.send_ready = c_.clock.send_ready(), r_.send_wall = wall_ns(); }
  void posting_recv() { r_.recv_ready = c_.clock.recv_ready(), r_.recv_wall = wall_ns(); }
  void sent(const Transfer& t) { add(Activity::send, c_.rank, t.peer, t, r_.send_ready, c_.send_end, r_.send_wall); }
  void received(const Transfer& t) {
    add(Activity::recv, t.peer, c_.rank, t, r_.recv_ready, c_.recv_end, r_.recv_wall);
  }
  // After the step's transfers (before its staged combine and copy).
  void transfers_done() { r_.work_wall = wall_ns(); }
  // After end_step(work).
  void step_done(const Step& st, Picos work) {
    Timeline& out = *r_.timeline;
    const std::size_t before = out.size();
    add_local_work(out, c_.rank, c_.step, st, c_.clock.now() - work, c_.clock.now());
    if (out.size() > before) out.back().wall_start_ns = r_.work_wall, out.back().wall_end_ns = wall_ns();
  }

 private:
  void add(Activity a, int src, int dst, const Transfer& t, Picos ready, Picos end, std::int64_t wall_start) {
    const Picos busy = transfer_busy(config_.model, config_.layout, src, dst, t.count * c_.eb);
    r_.timeline->push_back(TimelineEvent{c_.rank, a, t.peer, c_.step, t.offset, t.count, bar_start(ready, end, busy),
                                         end, wall_start, wall_ns()});
  }
  StepRun& r_;
  const ExecutorConfig& config_;
  const LinkRank& c_;
};

// The ranges of y that still hold only the run's input (RunInput): where a
// step reads y (a send, a local copy) or combines into it, and where a
// receive replaces it. Ascending, disjoint [begin, end) element ranges in
// c.unwritten; empty without an input (then every call is a no-op apart
// from returning y's address).
class UnwrittenInput {
 public:
  // The run's view (its ranges live in c.unwritten between advances).
  UnwrittenInput(LinkRank& c, std::byte* y, RunInput input)
      : ranges_(c.unwritten), y_(y), data_(input.data), eb_(c.eb), result_read_(input.result_read) {}
  // At the run's start: all of y is unwritten (with an input).
  static void begin(LinkRank& c, const std::byte* y, RunInput input) {
    c.unwritten.clear();
    if (input.data && input.data != y && input.count > 0 && c.eb > 0) c.unwritten.emplace_back(0, input.count);
  }

  // Where the region [offset, offset + count) of y can be read: the input
  // while the whole region is unwritten, else y (copying in its unwritten
  // parts first).
  const std::byte* source(std::uint64_t offset, std::uint64_t count) {
    if (!ranges_.empty() && count > 0) {
      for (const auto& [begin, end] : ranges_)
        if (begin <= offset && offset + count <= end) return data_ + offset * eb_;
      written(offset, count, true);
    }
    return y_ + offset * eb_;
  }

  // A receive into [offset, offset + count) is about to land: replacing,
  // it makes the region y's own; combining, it needs y's values there.
  void receiving(const Transfer& t, Combine side) {
    if (!ranges_.empty() && t.count > 0) written(t.offset, t.count, side != Combine::replace);
  }
  void overwriting(std::uint64_t offset, std::uint64_t count) {
    if (!ranges_.empty() && count > 0) written(offset, count, false);
  }

  // The run is over: y takes whatever is still unwritten, if anyone reads it.
  void finish() {
    if (result_read_) written(0, ~std::uint64_t{0} / 2, true);
  }

 private:
  // Removes [offset, offset + count) from the unwritten ranges, copying the
  // input into y there first when `copy`.
  void written(std::uint64_t offset, std::uint64_t count, bool copy) {
    const std::uint64_t lo = offset, hi = offset + count;
    for (std::size_t i = 0; i < ranges_.size();) {
      auto [begin, end] = ranges_[i];
      if (end <= lo || begin >= hi) {
        ++i;
        continue;
      }
      const std::uint64_t a = std::max(begin, lo), b = std::min(end, hi);
      if (copy) std::memcpy(y_ + a * eb_, data_ + a * eb_, static_cast<std::size_t>((b - a) * eb_));
      if (begin < a && b < end) {  // the middle goes: split
        ranges_[i].second = a;
        ranges_.emplace(ranges_.begin() + static_cast<std::ptrdiff_t>(i) + 1, b, end);
        return;
      }
      if (begin < a) {
        ranges_[i++].second = a;
      } else if (b < end) {
        ranges_[i++].first = b;
      } else {
        ranges_.erase(ranges_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }

  std::vector<std::pair<std::uint64_t, std::uint64_t>>& ranges_;
  std::byte* y_;
  const std::byte* data_;
  std::size_t eb_;
  bool result_read_;
};

// Where a step's receive lands: straight in its region of y, combined there
// by the link, or -- staged (stages_receive) -- replaced into the scratch
// and applied to y by apply() once the step's transfers are done.
class Landing {
 public:
  Landing(const Step& st, bool staged, std::byte* y, std::byte* scratch, std::size_t eb)
      : st_(st), own_(y + st.recv.offset * eb), staged_(staged), target_(staged ? scratch : own_) {}

  const Transfer& recv() const { return st_.recv; }
  void start(Link& in, LinkRank& c, UnwrittenInput& unwritten) const {
    if (!staged_) unwritten.receiving(st_.recv, st_.combine);
    in.start_recv(c, st_.recv, target_, staged_ ? Combine::replace : st_.combine);
  }
  void apply(const LinkRank& c, UnwrittenInput& unwritten) const {
    if (!staged_) return;
    unwritten.receiving(st_.recv, st_.combine);
    apply_received(c, own_, target_, st_.recv.count, st_.combine);
  }

 private:
  const Step& st_;
  std::byte* own_;
  bool staged_;
  std::byte* target_;
};

// Which of a step's transfers go in part `part` (0, then 1): both at once
// where the ports allow, else one at a time, in send_goes_first's order.
enum : unsigned { kSendOp = 1, kRecvOp = 2 };
unsigned part_ops(const Step& st, unsigned part, bool bidirectional, bool send_first) {
  const unsigned all = (st.send ? kSendOp : 0u) | (st.recv ? kRecvOp : 0u);
  if (all != (kSendOp | kRecvOp) || bidirectional) return part == 0 ? all : 0u;
  const unsigned first = send_first ? kSendOp : kRecvOp;
  return part == 0 ? first : part == 1 ? all & ~first : 0u;
}

}  // namespace

void StepExecutor::run(LinkRank& c, std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op,
                       Timeline* timeline, RunInput input) {
  StepRun r;
  start(r, c, steps, y, scratch, op, timeline, input);
  advance(r, c, true);
}

void StepExecutor::start(StepRun& r, LinkRank& c, std::span<const Step> steps, std::byte* y, std::byte* scratch,
                         const ReduceOp& op, Timeline* timeline, RunInput input) {
  r = StepRun{};
  r.steps = steps;
  r.y = y;
  r.scratch = scratch;
  r.timeline = config_.virtual_clock ? timeline : nullptr;
  r.input = input;
  r.active = true;
  c.y = y;
  c.scratch = scratch;
  c.op = &op;
  c.eb = op.element_bytes;
  c.waiting = LinkRank::Wait::none;
  c.send_done = c.recv_done = true;
  if (local_) local_->publish_start(c);
  UnwrittenInput::begin(c, y, input);
}

bool StepExecutor::advance(StepRun& r, LinkRank& c, bool wait) {
  if (!r.active) return true;
  try {
    if (aborted()) throw LinkAborted{};
    if (!step_on(r, c, wait)) return false;
  } catch (const LinkAborted&) {
    // Another rank failed: its error is the one to report.
    r.active = false;
    if (local_) local_->abort();
    withdraw(c);
    throw;
  } catch (...) {
    r.active = false;
    fail(std::current_exception());
    withdraw(c);
    throw;
  }
  r.active = false;
  UnwrittenInput(c, r.y, r.input).finish();
  if (local_) local_->publish_done(c);
  return true;
}

void StepExecutor::begin_step(StepRun& r, LinkRank& c) {
  const Step& st = r.steps[r.next];
  c.step = r.next;
  if (local_) local_->publish_step(c);
  if (config_.virtual_clock) c.clock.begin_step();
  r.out = st.send ? &link_to(c, st.send.peer) : nullptr;
  r.in = st.recv ? &link_to(c, st.recv.peer) : nullptr;
  // A send that goes first is acknowledged before the receive starts: only
  // the link can need the receive staged then.
  r.send_first = st.send && st.recv && !bidirectional() && send_goes_first(c.rank, st);
  r.staged = st.recv && stages_receive(st, r.in->combines_in_place(), !r.send_first);
  r.part = 0;
  r.posted = false;
  r.begun = true;
}

// The step's transfers done: its staged receive applied, its local copy,
// its work on the clock.
void StepExecutor::end_step(StepRun& r, LinkRank& c) {
  const Step& st = r.steps[r.next];
  const std::size_t eb = c.eb;
  Recorder record(r, config_, c);
  UnwrittenInput unwritten(c, r.y, r.input);
  if (record) record.transfers_done();
  if (st.recv) Landing(st, r.staged, r.y, r.scratch, eb).apply(c, unwritten);
  if (st.copy.count > 0 && eb > 0) {
    const std::byte* const from = unwritten.source(st.copy.from, st.copy.count);
    unwritten.overwriting(st.copy.to, st.copy.count);
    std::memmove(r.y + st.copy.to * eb, from, static_cast<std::size_t>(st.copy.count * eb));
  }
  if (config_.virtual_clock) {
    const Picos work = config_.model.step_work(st, eb);
    c.clock.end_step(work);
    if (record) record.step_done(st, work);
  }
  ++r.next;
  r.begun = false;
}

bool StepExecutor::step_on(StepRun& r, LinkRank& c, bool wait) {
  const bool clock = config_.virtual_clock;
  const bool bidirectional = this->bidirectional();
  Recorder record(r, config_, c);
  UnwrittenInput unwritten(c, r.y, r.input);
  while (r.next < r.steps.size()) {
    const Step& st = r.steps[r.next];
    if (!r.begun) begin_step(r, c);
    const unsigned ops = part_ops(st, r.part, bidirectional, r.send_first);
    if (ops == 0) {
      end_step(r, c);
      continue;
    }
    const bool sends = ops & kSendOp, receives = ops & kRecvOp;
    if (!r.posted) {
      if (record) {
        if (sends) record.posting_send();
        if (receives) record.posting_recv();
      }
      if (sends) r.out->start_send(c, st.send, unwritten.source(st.send.offset, st.send.count));
      if (receives) Landing(st, r.staged, r.y, r.scratch, c.eb).start(*r.in, c, unwritten);
      r.posted = true;
    }
    if (wait) {
      finish(c, sends ? r.out : nullptr, receives ? r.in : nullptr);
    } else {
      // Both tested, whatever the first says: each test progresses its link.
      const bool sent = !sends || r.out->test_send(c);
      const bool received = !receives || r.in->test_recv(c);
      if (!sent || !received) return false;
    }
    if (record) {
      if (sends) record.sent(st.send);
      if (receives) record.received(st.recv);
    }
    if (clock) {
      if (sends) c.clock.send_done(c.send_end);
      if (receives) c.clock.recv_done(c.recv_end);
    }
    r.posted = false;
    ++r.part;
  }
  return true;
}

void StepExecutor::fail(std::exception_ptr error) noexcept {
  if (local_) {
    local_->fail(std::move(error));  // on_failure (the engine's copy of config_), then the abort
  } else if (config_.on_failure) {
    try {
      config_.on_failure(std::move(error));
    } catch (...) {
    }
  }
}

void StepExecutor::withdraw(LinkRank& c) noexcept {
  if (local_) local_->withdraw(c);
  if (remote_) remote_->withdraw(c);
}

// ---- waiting ----------------------------------------------------------------------

int StepExecutor::waited_for(const LinkRank& c, LinkRank::Wait what) const {
  return link_to(c, what == LinkRank::Wait::recv ? c.receiving.peer : c.sending.peer).awaited(c, what);
}

void StepExecutor::note_wait(LinkRank& c, LinkRank::Wait what) const {
  const Transfer& t = what == LinkRank::Wait::recv ? c.receiving : c.sending;
  c.waiting = what;
  c.peer = waited_for(c, what);
  c.wait_count = t.count;
  c.wait_offset = t.offset;
  c.wait_started = std::chrono::steady_clock::now();
}

WaitPolicy StepExecutor::policy(LinkRank& c, Deadline deadline) const {
  // The lambdas capture two pointers each, which std::function stores
  // inline: a wait allocates nothing.
  WaitPolicy p;
  p.deadline = deadline;
  p.timeout_message = [this, &c] {
    const auto ms = config_.waits.timeout ? config_.waits.timeout->count() : 0;
    return describe_wait(c, link_to(c, c.peer), "timed out after " + std::to_string(ms) + " ms");
  };
  if (config_.peer_gone) p.check = [this, &c] { check_peer(c, c.waiting); };
  if (config_.waits.on_report && config_.waits.report_every.count() > 0) {
    p.report_every = config_.waits.report_every;
    p.report = [this, &c] {
      const auto waited =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - c.wait_started);
      config_.waits.on_report(
          describe_wait(c, link_to(c, c.peer), "still blocked after " + std::to_string(waited.count()) + " s"));
    };
  }
  return p;
}

void StepExecutor::finish(LinkRank& c, Link* send, Link* recv) {
  Deadline recv_deadline = Deadline::max(), ack_deadline = Deadline::max();
  bool recv_noted = false, ack_noted = false;
  for (;;) {
    const bool sent = !send || send->test_send(c);
    const bool received = !recv || recv->test_recv(c);
    if (sent && received) break;
    if ((!sent && !send->can_block()) || (!received && !recv->can_block())) {
      poll_wait(c, sent ? nullptr : send, received ? nullptr : recv);
      break;
    }
    // Both links can sleep: the receive first, then the acknowledgement (a
    // sleeping sender is woken by its ack; the order costs nothing).
    if (!received) {
      if (!recv_noted) {
        recv_noted = true;
        note_wait(c, LinkRank::Wait::recv);
        if (config_.waits.timeout) recv_deadline = c.wait_started + *config_.waits.timeout;
      }
      recv->block(c, LinkRank::Wait::recv, policy(c, recv_deadline));
    } else {
      if (!ack_noted) {
        ack_noted = true;
        note_wait(c, LinkRank::Wait::ack);
        if (config_.waits.timeout) ack_deadline = c.wait_started + *config_.waits.timeout;
      }
      send->block(c, LinkRank::Wait::ack, policy(c, ack_deadline));
    }
  }
  c.waiting = LinkRank::Wait::none;
}

// A network request is open: it only progresses while we poll it, so never
// sleep on a futex. Spin a few microseconds, then yield the core between
// polls (other ranks on this core get to run), and after a while sleep a
// little between polls so that a long legitimate wait does not burn a core.
void StepExecutor::poll_wait(LinkRank& c, Link* send, Link* recv) {
  using Clock = std::chrono::steady_clock;
  note_wait(c, recv ? LinkRank::Wait::recv : LinkRank::Wait::ack);
  const auto start = c.wait_started;
  const Deadline deadline = config_.waits.timeout ? start + *config_.waits.timeout : Deadline::max();
  const WaitPolicy p = policy(c, deadline);
  auto next_report = p.report ? start + p.report_every : Deadline::max();
  auto next_check = config_.peer_gone ? start + kWaitSleepSlice : Deadline::max();
  for (std::uint64_t i = 1;; ++i) {
    bool sent = !send || send->test_send(c);
    bool received = !recv || recv->test_recv(c);
    if (sent && received) return;
    if (sent) send = nullptr;
    if (received) {
      recv = nullptr;
      if (c.waiting == LinkRank::Wait::recv) note_wait(c, LinkRank::Wait::ack);
    }
    if (i < 64) {
      cpu_relax();
      continue;
    }
    if ((i & 15) == 0) {
      const auto now = Clock::now();
      if (now >= deadline) throw TimeoutError(p.timeout_message());
      if (now >= next_report) {
        p.report();
        next_report = now + p.report_every;
      }
      if (aborted()) throw LinkAborted{};
      if (now >= next_check) {
        if (recv) check_peer(c, LinkRank::Wait::recv);
        if (send) check_peer(c, LinkRank::Wait::ack);
        next_check = now + kWaitSleepSlice;
      }
      if (now - start > std::chrono::milliseconds(10)) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
    }
    sched_yield();
  }
}

void StepExecutor::check_peer(LinkRank& c, LinkRank::Wait what) const {
  const int peer = waited_for(c, what);
  const std::string why = config_.peer_gone(peer);
  if (why.empty()) return;
  note_wait(c, what);
  throw SystemError(describe_wait(c, link_to(c, peer), "gave up") + ": " + why);
}

std::string StepExecutor::describe_wait(const LinkRank& c, const Link& link, std::string_view how) const {
  std::ostringstream m;
  m << config_.layout.describe(c.rank) << ", step " << c.step << " of " << config_.waits.round_name << " " << c.round;
  if (!c.activity.empty()) m << " (" << c.activity << ")";
  m << ": " << how;
  switch (c.waiting) {
    case LinkRank::Wait::recv:
      m << " waiting for rank " << c.peer << " to send the " << c.wait_count << " elements it receives (at element "
        << c.wait_offset << ")" << link.peer_state(c, c.peer);
      break;
    case LinkRank::Wait::ack:
      m << " waiting for rank " << c.peer << " to receive the " << c.wait_count << " elements it sends (from element "
        << c.wait_offset << ")" << link.peer_state(c, c.peer);
      break;
    case LinkRank::Wait::barrier:
    case LinkRank::Wait::none: break;
  }
  return m.str();
}

}  // namespace copse
