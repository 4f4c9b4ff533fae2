#include "node/emulator.hpp"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <type_traits>
#include <utility>

#include "common/error.hpp"
#include "common/wait.hpp"
#include "internode/executor.hpp"

namespace copse {

namespace {

// ---- link words ---------------------------------------------------------------
//
// A transfer is a rendezvous, and whichever side arrives second moves the data
// (one copy, straight between the two ranks' buffers), so the first to arrive
// sleeps at most once and the second never does:
//
//  - Each rank owns one outbox (it has at most one send outstanding, so FIFO
//    order per (source, destination) pair holds trivially). A sender publishes
//    (data, count, ready time) and sets the state to posted(dst).
//  - Each rank owns one inbox (at most one receive outstanding). A receiver
//    that finds no send posted for it publishes (target, count, side, ready
//    time) and sets the inbox state to posted(src).
//  - Each side stores its own state, then reads the other's (sequentially
//    consistent, Dekker style): at least one sees the other. The mover claims
//    the sender's outbox by CAS (posted(dst) -> claimed by the receiver, or
//    -> idle by the sender itself), so exactly one of them moves the data.
//  - A receiver that pulled acks by setting the outbox back to idle with the
//    transfer's end time; a sender that delivered marks the inbox done with it.
//  - A receiver sleeps on its inbox's doorbell, which senders ring after a
//    post or a delivery addressed to it; a sender sleeps on its outbox state.
//
// kAbortBit is sticky: once a run fails it is OR-ed into every outbox state and
// barrier word, so every CAS of the protocol fails and every sleeper wakes.
constexpr std::uint32_t kIdle = 0;
constexpr std::uint32_t kClaimed = 2;  // outbox: the receiver is pulling the data
constexpr std::uint32_t kDone = 2;     // inbox: the sender has delivered
constexpr std::uint32_t kAbortBit = 0x80000000U;
constexpr std::uint32_t posted(int peer) { return (static_cast<std::uint32_t>(peer) << 2) | 1U; }

struct alignas(64) Outbox {
  std::atomic<std::uint32_t> state{kIdle};
  // Written by the sender before posting, read by the addressed receiver only.
  const std::byte* data = nullptr;
  std::uint64_t count = 0;
  Picos sender_ready = 0;
  // Written by a receiver that pulled, before its ack.
  Picos end = 0;
};

struct alignas(64) Inbox {
  std::atomic<std::uint32_t> state{kIdle};
  std::atomic<std::uint32_t> bell{0};  // rung by every post or delivery to this rank
  // Written by the receiver before posting, read by the addressed sender only.
  std::byte* target = nullptr;
  std::uint64_t count = 0, offset = 0;
  Picos recv_ready = 0;
  Combine side = Combine::replace;
  // Written by a sender that delivered, before marking the inbox done.
  Picos end = 0;
};

struct alignas(64) Word {
  std::atomic<std::uint32_t> v{0};
};

// Where a rank is, for error messages only.
struct alignas(64) Progress {
  std::atomic<int> repetition{-1};     // the repetition whose steps the rank has started
  std::atomic<std::uint64_t> step{0};  // index of the step being run
  std::atomic<bool> done{false};       // finished the steps of `repetition`
  std::atomic<std::uint32_t> go{0};    // the barrier releases the rank by changing it
};

struct alignas(64) RankOutcome {
  Picos finish = 0;
  bool virtual_time_changed = false;
  int bad_repetition = -1;  // first repetition with a wrong result
  std::uint64_t bad_element = 0;
  std::string bad_value;  // what the rank held there
};

// Unwinds a rank whose run was aborted by another rank's failure.
struct Aborted {};

enum class WaitKind { none, recv, ack, barrier };

inline bool overlaps(const Transfer& a, const Transfer& b) {
  return a.count > 0 && b.count > 0 && a.offset < b.offset + b.count && b.offset < a.offset + a.count;
}

std::string format_element(const ReduceOp& op, const std::byte* p) {
  std::ostringstream out;
  const std::size_t scalar = dtype_size(op.dtype);
  if (op.element_bytes % scalar != 0) {
    out << "0x";
    static const char* hex = "0123456789abcdef";
    for (std::size_t i = 0; i < op.element_bytes; ++i) {
      const auto b = static_cast<unsigned>(p[i]);
      out << hex[b >> 4] << hex[b & 15];
    }
    return out.str();
  }
  const std::size_t n = op.element_bytes / scalar;
  if (n > 1) out << '(';
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out << ", ";
    const std::byte* q = p + i * scalar;
    auto put = [&](auto v) {
      std::memcpy(&v, q, sizeof(v));
      if constexpr (sizeof(v) == 1)
        out << static_cast<int>(v);
      else
        out << v;
    };
    switch (op.dtype) {
      case DType::int8:
        put(std::int8_t{});
        break;
      case DType::int16:
        put(std::int16_t{});
        break;
      case DType::int32:
        put(std::int32_t{});
        break;
      case DType::int64:
        put(std::int64_t{});
        break;
      case DType::uint8:
        put(std::uint8_t{});
        break;
      case DType::uint16:
        put(std::uint16_t{});
        break;
      case DType::uint32:
        put(std::uint32_t{});
        break;
      case DType::uint64:
        put(std::uint64_t{});
        break;
      case DType::float32:
        put(float{});
        break;
      case DType::float64:
        put(double{});
        break;
    }
  }
  if (n > 1) out << ')';
  return out.str();
}

// One rank's private state, on its thread's stack.
struct RankCtx {
  int rank = 0;
  RankClock clock;
  std::byte* y = nullptr;        // working buffer (the result)
  std::byte* scratch = nullptr;  // staging for steps whose send and receive overlap
  int repetition = 0;
  std::uint64_t step = 0;
  // What the rank is blocked on, for the timeout message.
  WaitKind waiting = WaitKind::none;
  int peer = -1;
  std::uint64_t wait_count = 0, wait_offset = 0;
};

constexpr std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::size_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
}

// Anonymous memory straight from mmap, untouched until used.
class Arena {
 public:
  Arena() = default;
  explicit Arena(std::size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (bytes >= (std::size_t{8} << 20)) madvise(p, bytes, MADV_HUGEPAGE);  // a hint; failure is fine
    data_ = static_cast<std::byte*>(p);
  }
  Arena(Arena&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
  Arena& operator=(Arena&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    if (data_) munmap(data_, bytes_);
  }
  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

class Cluster {
 public:
  Cluster(const AlgorithmInfo& algorithm, SchedulePlan plan, const Shape& shape, const ReduceOp& op,
          const EmulatorConfig& config)
      : algorithm_(algorithm),
        plan_(std::move(plan)),
        shape_(shape),
        op_(op),
        config_(config),
        p_(shape.ranks),
        eb_(op.element_bytes),
        bytes_(static_cast<std::size_t>(shape.count * op.element_bytes)),
        bidirectional_(config.model.ports() == Ports::bidirectional) {}

  EmulationResult run();

  // Thread entry; never throws.
  void rank_main(int rank) noexcept;

 private:
  void materialise();
  void compute_reference();
  void fail(std::exception_ptr error) noexcept;
  void abort_all() noexcept;

  void prepare(RankCtx& c);
  void run_steps(RankCtx& c);
  // Posts a send; true if it was delivered at once (the receiver was
  // waiting), with the transfer's end time in `end`.
  bool post(RankCtx& c, const Transfer& send, Picos& end);
  Picos await_ack(RankCtx& c, const Transfer& send);
  Picos receive(RankCtx& c, const Step& step, bool stage);
  Picos pull(RankCtx& c, const Transfer& recv, Outbox& ob, std::byte* target, Combine side);
  void ring(Inbox& inbox);
  std::string size_mismatch(int src, std::uint64_t sent, int dst, std::uint64_t received, std::uint64_t offset) const;
  void apply(std::byte* dst, const std::byte* src, std::uint64_t count, Combine side) const;
  void barrier(RankCtx& c);
  void arrive(std::uint32_t participants);
  void verify(RankCtx& c);

  std::uint32_t block(RankCtx& c, const std::atomic<std::uint32_t>& word, std::uint32_t old, Deadline deadline);
  Deadline deadline_from_now() const { return std::chrono::steady_clock::now() + config_.wait_timeout; }
  // Barrier waits outlast step waits, so that a stuck step reports itself
  // (naming its peer) before the ranks that finished give up on it.
  Deadline barrier_deadline_from_now() const {
    return std::chrono::steady_clock::now() + 2 * config_.wait_timeout + std::chrono::milliseconds(100);
  }
  std::string describe_wait(const RankCtx& c) const;
  int level(int a, int b) const { return link_level(a, b, config_.ranks_per_node, config_.node_of); }
  int node_of(int rank) const {
    return config_.node_of.empty() ? rank / config_.ranks_per_node : config_.node_of[static_cast<std::size_t>(rank)];
  }

  const AlgorithmInfo& algorithm_;
  SchedulePlan plan_;
  const Shape shape_;
  const ReduceOp& op_;
  const EmulatorConfig& config_;
  const int p_;
  const std::size_t eb_;
  const std::size_t bytes_;  // per rank vector
  const bool bidirectional_;

  // The plan, materialised once: rank r's steps are steps_[first_[r] .. first_[r+1]).
  std::vector<Step> steps_;
  std::vector<std::size_t> first_;
  std::vector<std::uint64_t> scratch_elements_;  // per rank

  // Buffers live here, not on rank threads, so that an aborted rank never
  // frees memory a peer may still be reading.
  // One arena for every rank's working buffer and scratch (huge pages where
  // the kernel offers them: fewer page faults for hundreds of MiB), so that
  // an aborted rank never frees memory a peer may still be reading.
  Arena arena_;
  std::vector<std::size_t> buffer_offset_;  // per rank: Y at arena + offset, scratch right after
  std::vector<std::byte> reference_;        // what a verified rank holds

  std::unique_ptr<Outbox[]> outbox_;
  std::unique_ptr<Inbox[]> inbox_;
  std::unique_ptr<Progress[]> progress_;
  std::unique_ptr<RankOutcome[]> outcome_;
  std::vector<double> wall_;  // [repetition * p + rank]
  Word barrier_count_;

  std::atomic<bool> aborting_{false};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

void Cluster::materialise() {
  const SchedulePlan& plan = plan_;
  if (!plan) throw ScheduleError("algorithm '" + std::string(algorithm_.name) + "' produced no plan");
  first_.assign(static_cast<std::size_t>(p_) + 1, 0);
  scratch_elements_.assign(static_cast<std::size_t>(p_), 0);
  const std::uint64_t n = shape_.count;
  auto in_range = [n](std::uint64_t offset, std::uint64_t count) { return offset <= n && count <= n - offset; };
  for (int r = 0; r < p_; ++r) {
    first_[static_cast<std::size_t>(r)] = steps_.size();
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
        if (t->peer >= p_ || t->peer == r)
          bad(std::string(verb) + " rank " + std::to_string(t->peer) + ", which is " +
              (t->peer == r ? "itself" : "not a rank") + " (p = " + std::to_string(p_) + ")");
        if (!in_range(t->offset, t->count))
          bad(std::string(t == &s.send ? "sends" : "receives into") + " elements [" + std::to_string(t->offset) + ", " +
              std::to_string(t->offset + t->count) + ") of a " + std::to_string(n) + "-element vector");
      }
      if (s.copy.count > 0 && (!in_range(s.copy.from, s.copy.count) || !in_range(s.copy.to, s.copy.count)))
        bad("copies " + std::to_string(s.copy.count) + " elements from " + std::to_string(s.copy.from) + " to " +
            std::to_string(s.copy.to) + " in a " + std::to_string(n) + "-element vector");
      if (s.send && s.recv && overlaps(s.send, s.recv)) {
        auto& need = scratch_elements_[static_cast<std::size_t>(r)];
        need = std::max(need, s.recv.count);
      }
      steps_.push_back(s);
      ++index;
    }
  }
  first_[static_cast<std::size_t>(p_)] = steps_.size();
}

void Cluster::compute_reference() {
  if (algorithm_.collective == Collective::bcast) {
    reference_.resize(bytes_);
    fill_input(op_, shape_.root, shape_.count, reference_.data());
  } else {
    reference_ = reference_result(op_, p_, shape_.count);
  }
}

void Cluster::fail(std::exception_ptr error) noexcept {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::move(error);
  }
  abort_all();
}

void Cluster::abort_all() noexcept {
  if (aborting_.exchange(true)) return;
  for (int r = 0; r < p_; ++r) {
    outbox_[static_cast<std::size_t>(r)].state.fetch_or(kAbortBit, std::memory_order_acq_rel);
    wake_all(outbox_[static_cast<std::size_t>(r)].state);
    inbox_[static_cast<std::size_t>(r)].bell.fetch_add(1, std::memory_order_acq_rel);
    wake_all(inbox_[static_cast<std::size_t>(r)].bell);
  }
  for (int r = 0; r < p_; ++r) {
    auto& go = progress_[static_cast<std::size_t>(r)].go;
    go.fetch_or(kAbortBit, std::memory_order_acq_rel);
    wake_all(go);
  }
}

std::uint32_t Cluster::block(RankCtx& c, const std::atomic<std::uint32_t>& word, std::uint32_t old, Deadline deadline) {
  // The lambda captures two pointers, which std::function stores inline: no allocation.
  return wait_while_equal(word, old, deadline, [this, &c] { return describe_wait(c); });
}

std::string Cluster::describe_wait(const RankCtx& c) const {
  std::ostringstream m;
  const auto ms = config_.wait_timeout.count();
  m << "rank " << c.rank;
  if (config_.nodes > 1 || !config_.node_of.empty()) m << " (node " << node_of(c.rank) << ")";
  auto peer_state = [&] {
    const Progress& pr = progress_[static_cast<std::size_t>(c.peer)];
    const std::string who = "; rank " + std::to_string(c.peer);
    const int rep = pr.repetition.load(std::memory_order_relaxed);
    if (rep < c.repetition) return who + " has not started its schedule";
    if (rep > c.repetition || pr.done.load(std::memory_order_relaxed)) return who + " has finished its schedule";
    return who + " is in its step " + std::to_string(pr.step.load(std::memory_order_relaxed));
  };
  switch (c.waiting) {
    case WaitKind::recv:
      m << ", step " << c.step << " of repetition " << c.repetition << ": timed out after " << ms
        << " ms waiting for rank " << c.peer << " to send the " << c.wait_count << " elements it receives (at element "
        << c.wait_offset << ")" << peer_state();
      break;
    case WaitKind::ack:
      m << ", step " << c.step << " of repetition " << c.repetition << ": timed out after " << ms
        << " ms waiting for rank " << c.peer << " to receive the " << c.wait_count
        << " elements it sends (from element " << c.wait_offset << ")" << peer_state();
      break;
    case WaitKind::barrier:
      m << ": timed out after " << 2 * ms + 100 << " ms at the barrier before repetition " << c.repetition;
      break;
    case WaitKind::none:
      m << ": timed out";
      break;
  }
  return m.str();
}

void Cluster::apply(std::byte* dst, const std::byte* src, std::uint64_t count, Combine side) const {
  if (count == 0) return;
  if (side == Combine::replace)
    std::memcpy(dst, src, static_cast<std::size_t>(count * eb_));
  else
    op_.combine(dst, src, static_cast<std::size_t>(count), side);
}

std::string Cluster::size_mismatch(int src, std::uint64_t sent, int dst, std::uint64_t received,
                                   std::uint64_t offset) const {
  std::ostringstream m;
  m << "size mismatch: rank " << src << " sends " << sent << " elements to rank " << dst << ", which receives "
    << received << " elements (into element " << offset << ")";
  const Progress& pr = progress_[static_cast<std::size_t>(dst)];
  m << " in its step " << pr.step.load(std::memory_order_relaxed);
  return m.str();
}

void Cluster::ring(Inbox& inbox) {
  inbox.bell.fetch_add(1, std::memory_order_acq_rel);
  wake_all(inbox.bell);
}

bool Cluster::post(RankCtx& c, const Transfer& send, Picos& end) {
  Outbox& ob = outbox_[static_cast<std::size_t>(c.rank)];
  Inbox& ib = inbox_[static_cast<std::size_t>(send.peer)];
  ob.data = c.y + send.offset * eb_;
  ob.count = send.count;
  ob.sender_ready = c.clock.send_ready();
  const std::uint32_t mine = posted(send.peer);
  std::uint32_t expected = kIdle;
  if (!ob.state.compare_exchange_strong(expected, mine, std::memory_order_seq_cst)) throw Aborted{};
  if (ib.state.load(std::memory_order_seq_cst) != posted(c.rank)) {
    ring(ib);  // not there yet: it will find our post
    return false;
  }
  expected = mine;
  if (!ob.state.compare_exchange_strong(expected, kIdle, std::memory_order_seq_cst))
    return false;  // it found our post at the same moment and is pulling
  // The receiver is waiting for us: deliver into its buffer.
  if (ib.count != send.count) throw ScheduleError(size_mismatch(c.rank, send.count, send.peer, ib.count, ib.offset));
  end =
      transfer_end(ob.sender_ready, ib.recv_ready, config_.model.transfer(level(c.rank, send.peer), send.count * eb_));
  apply(ib.target, ob.data, send.count, ib.side);
  ib.end = end;
  ib.state.store(kDone, std::memory_order_release);
  ring(ib);
  return true;
}

Picos Cluster::await_ack(RankCtx& c, const Transfer& send) {
  Outbox& ob = outbox_[static_cast<std::size_t>(c.rank)];
  std::uint32_t s = ob.state.load(std::memory_order_acquire);
  if (s != kIdle) {
    c.waiting = WaitKind::ack;
    c.peer = send.peer;
    c.wait_count = send.count;
    c.wait_offset = send.offset;
    const Deadline deadline = deadline_from_now();
    while (s != kIdle) {
      if (s & kAbortBit) throw Aborted{};
      s = block(c, ob.state, s, deadline);
    }
    c.waiting = WaitKind::none;
  }
  return ob.end;
}

Picos Cluster::pull(RankCtx& c, const Transfer& recv, Outbox& ob, std::byte* target, Combine side) {
  if (ob.count != recv.count) throw ScheduleError(size_mismatch(recv.peer, ob.count, c.rank, recv.count, recv.offset));
  const Picos end = transfer_end(ob.sender_ready, c.clock.recv_ready(),
                                 config_.model.transfer(level(recv.peer, c.rank), recv.count * eb_));
  apply(target, ob.data, recv.count, side);
  ob.end = end;
  std::uint32_t expected = kClaimed;
  if (!ob.state.compare_exchange_strong(expected, kIdle, std::memory_order_release, std::memory_order_relaxed))
    throw Aborted{};
  wake_all(ob.state);
  return end;
}

Picos Cluster::receive(RankCtx& c, const Step& step, bool stage) {
  const Transfer& recv = step.recv;
  Outbox& ob = outbox_[static_cast<std::size_t>(recv.peer)];
  Inbox& ib = inbox_[static_cast<std::size_t>(c.rank)];
  const std::uint32_t for_me = posted(c.rank);
  // Staging: our own send of this step still needs the region as it was when
  // the step began, so land in scratch and apply after the send completes.
  std::byte* target = stage ? c.scratch : c.y + recv.offset * eb_;
  const Combine side = stage ? Combine::replace : step.combine;

  // The sender is there already: pull.
  std::uint32_t expected = for_me;
  if (ob.state.load(std::memory_order_acquire) == for_me &&
      ob.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel))
    return pull(c, recv, ob, target, side);

  // Post the receive, so that the sender can deliver, then wait.
  ib.target = target;
  ib.count = recv.count;
  ib.offset = recv.offset;
  ib.recv_ready = c.clock.recv_ready();
  ib.side = side;
  ib.state.store(posted(recv.peer), std::memory_order_seq_cst);
  bool timed = false;
  Deadline deadline{};
  for (;;) {
    // Read the bell first: a post or delivery after this read rings it.
    const std::uint32_t bell = ib.bell.load(std::memory_order_acquire);
    if (ib.state.load(std::memory_order_acquire) == kDone) {
      ib.state.store(kIdle, std::memory_order_relaxed);
      c.waiting = WaitKind::none;
      return ib.end;
    }
    if (aborting_.load(std::memory_order_acquire)) throw Aborted{};
    const std::uint32_t s = ob.state.load(std::memory_order_seq_cst);
    if (s == for_me) {
      expected = for_me;
      if (ob.state.compare_exchange_strong(expected, kClaimed, std::memory_order_seq_cst)) {
        if (ib.state.load(std::memory_order_acquire) == kDone) {
          // The sender delivered our message after we last looked and has
          // already posted its next one to us, which is what we claimed:
          // put it back for our next receive. (Its delivery's done mark
          // precedes that post, so seeing the post means seeing the mark.)
          expected = kClaimed;
          if (!ob.state.compare_exchange_strong(expected, for_me, std::memory_order_acq_rel)) throw Aborted{};
          ib.state.store(kIdle, std::memory_order_relaxed);
          c.waiting = WaitKind::none;
          return ib.end;
        }
        ib.state.store(kIdle, std::memory_order_relaxed);
        c.waiting = WaitKind::none;
        return pull(c, recv, ob, target, side);
      }
      continue;  // the sender claimed it: it is delivering
    }
    if (!timed) {
      timed = true;
      deadline = deadline_from_now();
      c.waiting = WaitKind::recv;
      c.peer = recv.peer;
      c.wait_count = recv.count;
      c.wait_offset = recv.offset;
    }
    block(c, ib.bell, bell, deadline);
  }
}

void Cluster::run_steps(RankCtx& c) {
  const std::size_t begin = first_[static_cast<std::size_t>(c.rank)];
  const std::size_t stop = first_[static_cast<std::size_t>(c.rank) + 1];
  Progress& progress = progress_[static_cast<std::size_t>(c.rank)];
  progress.done.store(false, std::memory_order_relaxed);
  progress.step.store(0, std::memory_order_relaxed);
  progress.repetition.store(c.repetition, std::memory_order_relaxed);
  for (std::size_t i = begin; i < stop; ++i) {
    const Step& st = steps_[i];
    c.step = i - begin;
    progress.step.store(c.step, std::memory_order_relaxed);
    c.clock.begin_step();
    Picos end = 0;
    if (st.send && st.recv) {
      if (bidirectional_) {
        // Both at once: post the send, serve the receive, then see the send done.
        const bool stage = overlaps(st.send, st.recv);
        const bool delivered = post(c, st.send, end);
        const Picos recv_end = receive(c, st, stage);
        c.clock.send_done(delivered ? end : await_ack(c, st.send));
        c.clock.recv_done(recv_end);
        if (stage) apply(c.y + st.recv.offset * eb_, c.scratch, st.recv.count, st.combine);
      } else if (send_goes_first(c.rank, st)) {
        c.clock.send_done(post(c, st.send, end) ? end : await_ack(c, st.send));
        c.clock.recv_done(receive(c, st, false));
      } else {
        const bool stage = overlaps(st.send, st.recv);
        c.clock.recv_done(receive(c, st, stage));
        c.clock.send_done(post(c, st.send, end) ? end : await_ack(c, st.send));
        if (stage) apply(c.y + st.recv.offset * eb_, c.scratch, st.recv.count, st.combine);
      }
    } else if (st.send) {
      c.clock.send_done(post(c, st.send, end) ? end : await_ack(c, st.send));
    } else if (st.recv) {
      c.clock.recv_done(receive(c, st, false));
    }
    if (st.copy.count > 0)
      std::memmove(c.y + st.copy.to * eb_, c.y + st.copy.from * eb_, static_cast<std::size_t>(st.copy.count * eb_));
    c.clock.end_step(config_.model.combine(local_work_elements(st) * eb_));
  }
  progress.done.store(true, std::memory_order_relaxed);
}

// A central counter, but every rank sleeps on its own word: thousands of
// threads on one futex word share one kernel hash bucket, which every other
// futex call hashing there must then walk.
void Cluster::arrive(std::uint32_t participants) {
  if (barrier_count_.v.fetch_add(1, std::memory_order_acq_rel) + 1 != participants) return;
  barrier_count_.v.store(0, std::memory_order_relaxed);
  for (int r = 0; r < p_; ++r) {
    auto& go = progress_[static_cast<std::size_t>(r)].go;
    go.fetch_add(1, std::memory_order_acq_rel);
    wake_all(go);
  }
}

void Cluster::barrier(RankCtx& c) {
  auto& go = progress_[static_cast<std::size_t>(c.rank)].go;
  const std::uint32_t old = go.load(std::memory_order_acquire);
  if (old & kAbortBit) throw Aborted{};
  // The main thread joins the first barrier once the reference is ready.
  arrive(static_cast<std::uint32_t>(p_) + (c.repetition == 0 ? 1U : 0U));
  std::uint32_t g = go.load(std::memory_order_acquire);
  if (g == old) {
    c.waiting = WaitKind::barrier;
    const Deadline deadline = barrier_deadline_from_now();
    while (g == old) g = block(c, go, old, deadline);
    c.waiting = WaitKind::none;
  }
  if (g & kAbortBit) throw Aborted{};
}

// The rank's input, generated afresh (as fast as copying a saved one, and
// half the memory); a bcast non-root starts from poison.
void Cluster::prepare(RankCtx& c) {
  if (bytes_ == 0) return;
  if (algorithm_.collective != Collective::bcast)
    fill_input(op_, c.rank, shape_.count, c.y);
  else if (c.rank == shape_.root)
    fill_input(op_, shape_.root, shape_.count, c.y);
  else
    std::memset(c.y, 0xA5, bytes_);
}

void Cluster::verify(RankCtx& c) {
  if (algorithm_.collective == Collective::reduce && c.rank != shape_.root) return;
  if (bytes_ == 0 || std::memcmp(c.y, reference_.data(), bytes_) == 0) return;
  RankOutcome& out = outcome_[static_cast<std::size_t>(c.rank)];
  if (out.bad_repetition >= 0) return;
  out.bad_repetition = c.repetition;
  for (std::uint64_t e = 0; e < shape_.count; ++e) {
    if (std::memcmp(c.y + e * eb_, reference_.data() + e * eb_, eb_) != 0) {
      out.bad_element = e;
      out.bad_value = format_element(op_, c.y + e * eb_);
      break;
    }
  }
}

void Cluster::rank_main(int rank) noexcept {
  RankCtx c;
  c.rank = rank;
  c.clock = RankClock(config_.model.ports());
  const auto r = static_cast<std::size_t>(rank);
  try {
    // Buffers: first touched by the rank's own thread (in prepare()).
    c.y = arena_.data() + buffer_offset_[r];
    if (scratch_elements_[r] > 0) c.scratch = c.y + round_up(bytes_, 64);
    RankOutcome& out = outcome_[r];
    for (int rep = 0; rep < config_.repetitions; ++rep) {
      c.repetition = rep;
      prepare(c);
      c.clock.reset();
      barrier(c);
      const auto t0 = std::chrono::steady_clock::now();
      run_steps(c);
      const auto t1 = std::chrono::steady_clock::now();
      wall_[static_cast<std::size_t>(rep) * static_cast<std::size_t>(p_) + r] =
          std::chrono::duration<double>(t1 - t0).count();
      if (rep == 0)
        out.finish = c.clock.now();
      else if (c.clock.now() != out.finish)
        out.virtual_time_changed = true;
      verify(c);
    }
  } catch (const Aborted&) {
    // Another rank failed; its error is the one reported.
  } catch (...) {
    fail(std::current_exception());
  }
}

struct ThreadArg {
  Cluster* cluster;
  int rank;
};

void* rank_thread(void* arg) {
  auto* a = static_cast<ThreadArg*>(arg);
  a->cluster->rank_main(a->rank);
  return nullptr;
}

// Linux 6.16+ gives each multi-threaded process a private futex hash sized by
// its CPU count (16 buckets on two cores): thousands of sleeping ranks would
// share them, and every wake would walk hundreds of waiters. Ask for about
// four buckets per thread (a process-wide setting; only ever grown). Older
// kernels refuse the request and keep their global hash, which is fine.
void widen_futex_hash(int threads) {
  constexpr int kPrFutexHash = 78, kSetSlots = 1, kGetSlots = 2;
  unsigned long want = 16;
  while (want < 4UL * static_cast<unsigned long>(threads) && want < (1UL << 16)) want <<= 1;
  const int have = prctl(kPrFutexHash, kGetSlots, 0UL, 0UL, 0UL);
  if (have < 0 || static_cast<unsigned long>(have) >= want) return;
  (void)prctl(kPrFutexHash, kSetSlots, want, 0UL, 0UL);
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kStackBytes = std::size_t{4} << 20;
#else
constexpr std::size_t kStackBytes = std::size_t{256} << 10;  // thousands of ranks start quickly
#endif

EmulationResult Cluster::run() {
  materialise();
  const auto p = static_cast<std::size_t>(p_);
  buffer_offset_.resize(p);
  // Buffers: the vector (and scratch) of every rank, in 4 KiB-aligned slots
  // so that no two ranks' data share a cache line. Sizes are in long double
  // first so that absurd shapes are refused rather than wrapped around.
  long double total = 0;
  std::size_t arena_bytes = 0;
  for (std::size_t r = 0; r < p; ++r) {
    buffer_offset_[r] = arena_bytes;
    const long double scratch = static_cast<long double>(scratch_elements_[r]) * static_cast<long double>(eb_);
    total += static_cast<long double>(shape_.count) * static_cast<long double>(eb_) + scratch + 4224;
    if (total > static_cast<long double>(physical_memory())) break;
    arena_bytes += round_up(bytes_, 64) + round_up(static_cast<std::size_t>(scratch), 64);
    arena_bytes = round_up(arena_bytes, 4096);
  }
  if (total > static_cast<long double>(physical_memory()))
    throw UsageError("emulating " + std::to_string(p_) + " ranks of " + std::to_string(shape_.count) +
                     " elements needs more memory than this machine has (" + std::to_string(physical_memory() >> 20) +
                     " MiB)");
  arena_ = Arena(std::max<std::size_t>(arena_bytes, 4096));
  outbox_ = std::make_unique<Outbox[]>(p);
  inbox_ = std::make_unique<Inbox[]>(p);
  progress_ = std::make_unique<Progress[]>(p);
  outcome_ = std::make_unique<RankOutcome[]>(p);
  wall_.assign(p * static_cast<std::size_t>(config_.repetitions), 0.0);

  if (p_ >= 64) widen_futex_hash(p_ + 1);
  std::vector<ThreadArg> args(p);
  std::vector<pthread_t> threads;
  threads.reserve(p);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  for (int r = 0; r < p_; ++r) {
    args[static_cast<std::size_t>(r)] = ThreadArg{this, r};
    pthread_t t;
    const int rc = pthread_create(&t, &attr, rank_thread, &args[static_cast<std::size_t>(r)]);
    if (rc != 0) {
      fail(std::make_exception_ptr(std::runtime_error("emulator: cannot start the thread of rank " + std::to_string(r) +
                                                      " of " + std::to_string(p_) + ": " + std::strerror(rc))));
      break;
    }
    threads.push_back(t);
  }
  pthread_attr_destroy(&attr);

  // The reference is computed here while the ranks set up; the first
  // repetition starts when both are done.
  if (!aborting_.load()) {
    try {
      compute_reference();
      arrive(static_cast<std::uint32_t>(p_) + 1);
    } catch (...) {
      fail(std::current_exception());
    }
  }
  for (pthread_t t : threads) pthread_join(t, nullptr);
  if (error_) std::rethrow_exception(error_);

  EmulationResult result;
  result.blocks = blocks_used(algorithm_, shape_);
  result.virtual_finish.resize(p);
  int bad_rep = -1, bad_rank = -1, changed_rank = -1;
  for (std::size_t r = 0; r < p; ++r) {
    const RankOutcome& o = outcome_[r];
    result.virtual_finish[r] = o.finish;
    result.virtual_time = std::max(result.virtual_time, o.finish);
    if (o.bad_repetition >= 0 && (bad_rep < 0 || o.bad_repetition < bad_rep))
      bad_rep = o.bad_repetition, bad_rank = static_cast<int>(r);
    if (o.virtual_time_changed && changed_rank < 0) changed_rank = static_cast<int>(r);
  }
  for (int rep = 0; rep < config_.repetitions; ++rep) {
    const auto* w = wall_.data() + static_cast<std::size_t>(rep) * p;
    result.wall_seconds.push_back(*std::max_element(w, w + p));
  }
  result.verified = bad_rep < 0 && changed_rank < 0;
  if (bad_rep >= 0) {
    const RankOutcome& o = outcome_[static_cast<std::size_t>(bad_rank)];
    std::ostringstream m;
    m << "repetition " << bad_rep << ": rank " << bad_rank << " holds a wrong result at element " << o.bad_element
      << ": " << o.bad_value << ", expected " << format_element(op_, reference_.data() + o.bad_element * eb_);
    result.failure = m.str();
  } else if (changed_rank >= 0) {
    result.failure = "rank " + std::to_string(changed_rank) + "'s virtual finish time differs between repetitions";
  }
  return result;
}

}  // namespace

EmulationResult emulate(const AlgorithmInfo& algorithm, const Shape& shape, const ReduceOp& op,
                        const EmulatorConfig& config) {
  validate_shape(algorithm, shape);
  if (!algorithm.plan) throw UsageError("algorithm '" + std::string(algorithm.name) + "' has no schedule builder");
  return emulate(algorithm, algorithm.plan(shape), shape, op, config);
}

EmulationResult emulate(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape,
                        const ReduceOp& op, const EmulatorConfig& config) {
  validate_shape(algorithm, shape);
  check_operator(algorithm, op.name, op.commutative);
  if (!op.combine || op.element_bytes == 0) throw UsageError("operator '" + op.name + "' has no combine function");
  if (config.nodes < 1 || config.ranks_per_node < 1)
    throw UsageError("the emulator needs at least one node and one rank per node");
  if (!config.node_of.empty()) {
    if (config.node_of.size() != static_cast<std::size_t>(shape.ranks))
      throw UsageError("the node map covers " + std::to_string(config.node_of.size()) + " ranks, but the schedule is planned for " +
                       std::to_string(shape.ranks));
  } else if (static_cast<long long>(config.nodes) * config.ranks_per_node != shape.ranks)
    throw UsageError("the emulated cluster has " + std::to_string(config.nodes) + " x " +
                     std::to_string(config.ranks_per_node) + " ranks, but the schedule is planned for " +
                     std::to_string(shape.ranks));
  if (config.repetitions < 1) throw UsageError("repetitions must be at least 1");
  if (config.wait_timeout.count() <= 0) throw UsageError("the wait timeout must be positive");
  if ((config.nodes > 1 || !config.node_of.empty()) && config.model.levels() < 2)
    throw UsageError("the cost model needs a link level for other nodes (level 1)");
  if (shape.ranks > (1 << 30)) throw UsageError("the emulator supports at most 2^30 ranks");
  Cluster cluster(algorithm, plan, shape, op, config);
  return cluster.run();
}

}  // namespace copse
