#pragma once
// The runtime core (issue 16): one implementation of a communicator rank's
// per-call path over a rank map and a set of links, used by the thread Comm
// (runtime/comm.cpp) and the MPI Comm (runtime/mpi_comm.cpp):
//  - entry: a call's plan from the rank's plan cache, or -- after the call's
//    checks (root, operator) -- a new one. How the ranks agree on a new plan
//    is the runtime's policy (threads: one plan shared by the team; processes:
//    one agreement round from rank 0), passed in as the entry's maker;
//  - run: the step executor over the team's shared-memory engine and the
//    rank's remote link, failures rethrown as the team's first failure;
//  - the direct paths: calls of one node in one round through the direct
//    reduce's slots (what fits them; a nonblocking or persistent call in
//    two halves, request.cpp's DirectCall), larger ones read by address,
//    (threads only) large allreduces in slices, and blocking broadcasts
//    through its ring;
//  - arrival: edge(), the arrival branch of allreduce (publish, agree on
//    every rank's prediction, the arrival key), planned_arrival();
//  - helpers for pieces, for input read without an up-front copy (RunInput)
//    and for blocks of unequal counts.
// What differs -- how predictions travel, where working memory lives, which
// numbering plans use -- is the runtime's, through CoreTeam's fields and
// RankCore's virtual hooks. The MPI-only parts stay in their own files
// (mpi_setup, mpi_segment, mpi_cma_probe, mpi_hierarchy_wire, mpi_failure).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/link.hpp"
#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "exec/step_executor.hpp"
#include "plan/arrival_monitor.hpp"
#include "plan/plan_cache.hpp"
#include "plan/planner.hpp"
#include "runtime/comm_options.hpp"
#include "runtime/pending.hpp"
#include "runtime/request.hpp"
#include "runtime/team_direct.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/link_engine.hpp"

namespace copse {

using RuntimeClock = std::chrono::steady_clock;
struct BlockCounts;  // below

// What a rank's core needs of its team; the thread Team's state and the MPI
// Team's derive from it and fill it in at set-up.
struct CoreTeam {
  virtual ~CoreTeam() = default;
  const CommOptionsBase* settings = nullptr;  // the team's options
  int ranks = 0;
  std::unique_ptr<LinkEngine> engine;  // the node's shared-memory links
  // One node: calls in one round through shared slots
  // (transport/direct_reduce.hpp, direct_gather.hpp), where the selection
  // would choose; null otherwise.
  std::unique_ptr<DirectReduce> direct;
  // The ranks are threads of one process, so a rank may read its peers'
  // buffers: large allreduces through the direct reduce's slices
  // (DirectReduce::allreduce_sliced reads the peers' user buffers by
  // address, which a process cannot do in another's memory).
  bool shares_memory = false;
  bool arrival_aware = false;  // the configured allreduce plans by predicted arrival (Comm::edge)
  RuntimeClock::time_point origin = RuntimeClock::now();
  // Each rank's number in the plans' numbering (node by node); empty: the
  // ranks' own.
  std::vector<int> internal_of;

  int internal(int rank) const { return internal_of.empty() ? rank : internal_of[static_cast<std::size_t>(rank)]; }
  // Rethrows the team's first failure (LinkAborted if none is recorded).
  [[noreturn]] virtual void rethrow_failure() = 0;
};

class RankCore {
 public:
  RankCore(CoreTeam& team, int rank);
  virtual ~RankCore() = default;
  RankCore(const RankCore&) = delete;
  RankCore& operator=(const RankCore&) = delete;

  // The largest team whose reduces of vectors too large for the direct
  // reduce's slots go by address (transport/direct_gather.hpp): its root
  // alone reads and combines every rank's vector, where a tree shares the
  // combining.
  static constexpr int kReduceByAddressRanks = 4;
  static constexpr std::size_t kPairReduceByAddressUpToBytes = std::size_t{512} << 10;  // two threads

  CoreTeam& core_team;
  const int rank;
  LinkRank link;
  std::optional<TeamDirectReduce> direct;  // when the team has a direct reduce
  std::int64_t calls = 0;
  Picos last_time = 0;  // Comm::virtual_time

  ArrivalMonitor monitor;
  std::vector<Picos> predicted;  // every rank's value of the current allreduce, in the plans' numbering
  ArrivalKey agreed_key;         // ... compressed
  std::vector<Picos> planned;    // Comm::planned_arrival

  Picos now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(RuntimeClock::now() - core_team.origin).count() * 1000;
  }
  virtual std::size_t cached_plans() const = 0;

  // Comm::set_form's and Comm::set_blocks': how the calls this rank starts
  // from now on are planned. A call keeps the choice it started with (a
  // nonblocking one plans its pieces as it progresses, maybe after the next
  // call has set another).
  CallChoice call_choice;
  // The key `options` give a call of `c`, with `choice` (call_choice when it
  // started): its form where the collective takes one, its block count.
  static CallKey call_key(const PlanOptions& options, const CallChoice& choice, Collective c, std::uint64_t count,
                          std::size_t element_bytes, const ReduceOp* op, int root, bool warmup = false);
  // plan(key); when the key's form is not the configured one (a form set by
  // Comm::set_form) and cannot plan the call (a UsageError: lanes on nodes
  // of unequal size, an algorithm the form does not take), plan(key) in the
  // configured form instead -- the call is served as it would have been
  // without the set form. If that fails too, the first error stands.
  template <class Plan>
  auto plan_in_call_form(const CallKey& key, Plan&& plan) const {
    try {
      return plan(key);
    } catch (const UsageError&) {
      const Form configured = core_team.settings->form_in_effect();
      if (key.form == configured) throw;
      CallKey fallback = key;
      fallback.form = configured;
      try {
        return plan(fallback);
      } catch (const UsageError&) {
      }
      throw;
    }
  }

  // The collectives (Comm's (runtime/communicator.hpp)), over the runtime's buffers.
  virtual void allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) = 0;
  virtual void reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) = 0;
  virtual void bcast(void* buffer, std::size_t count, DType dtype, int root) = 0;
  virtual void barrier() = 0;
  virtual void allgather(const void* send, void* recv, std::size_t count, DType dtype) = 0;
  virtual void reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) = 0;
  virtual void reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) = 0;
  // Scatter, gather or alltoall (`root` ignored by alltoall), through the
  // working vector of common/schedule.hpp's layout (MovedBlocks below).
  virtual void move(Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) = 0;

  // The cached entry of `key` (`op`: the reduction operator, or null for the
  // collectives that only move data), or a new one from make() -- the
  // runtime's planning and agreement -- after checking the call.
  template <class Entry, class Make>
  Entry& cached(PlanCache<Entry>& cache, const CallKey& key, DType dtype, const ReduceOp* op, Make&& make) {
    if (auto* found = cache.find(key, dtype, op ? op->identity.get() : nullptr)) return found->value;
    if (core_team.engine->aborted()) core_team.rethrow_failure();
    check_call(key, op);
    return cache.insert({key, dtype, op ? op->identity : nullptr, make()}).value;
  }
  // UsageError for a root that is not a rank, or an operator the named
  // algorithm does not take (the operator's own name in the message).
  void check_call(const CallKey& key, const ReduceOp* op) const;

  // Runs `steps` on the working vector `y` (input read from `input` where y
  // is not yet written) over the team's engine and the `remote` link;
  // failures rethrow the team's first.
  // `attach_from`: the run's LinkRank::attach_from (0: the engine's bound).
  void run(std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op, Collective c,
           Link* remote = nullptr, RunInput input = {}, std::uint64_t attach_from = 0);
  // The same run in parts (StepExecutor::start, advance): run() is
  // start_run, then advance_run waiting.
  void start_run(StepRun& r, std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op,
                 Collective c, Link* remote = nullptr, RunInput input = {}, std::uint64_t attach_from = 0);
  bool advance_run(StepRun& r, Link* remote, bool wait);
  // The direct paths: true when the call ran through the direct reduce
  // (and returned). Only where the configuration leaves the algorithm to
  // the selection, and never for an arrival-aware allreduce.
  bool allreduce_direct(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  bool barrier_direct();
  // A broadcast of one node through the direct reduce's ring
  // (transport/direct_bcast.hpp), where the selection would choose.
  bool bcast_direct(void* buffer, std::size_t count, std::size_t element_bytes, int root);
  // An allgather, and a reduce-scatter (equal blocks, or `blocks`), of one
  // node through the direct reduce's slots (transport/direct_gather.hpp),
  // where the selection would choose and what a rank posts fits a slot.
  bool allgather_direct(const void* send, void* recv, std::size_t count, std::size_t element_bytes);
  bool reduce_scatter_block_direct(const void* send, void* recv, std::size_t count, const ReduceOp& op);
  bool reduce_scatter_direct(const void* send, void* recv, const BlockCounts& blocks, const ReduceOp& op);
  // A reduce to `root` of one node through the same slots (every rank posts
  // its whole vector, the root folds them), where they hold it.
  bool reduce_direct(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root);
  // A scatter, gather or alltoall (`c`) of one node through the same slots
  // where what a rank posts fits them, else by address where
  // reads_by_address allows it (TeamDirectReduce::move).
  bool move_direct(Collective c, const void* send, void* recv, std::size_t count, std::size_t element_bytes, int root);
  // A blocking v-variant (`args.vector`) of one node by address
  // (TeamDirectReduce::vector), wherever the team's ranks may read each
  // other's memory -- decided without its counts, which only some ranks
  // know, so alike on every rank.
  bool vector_direct(const CallArgs& args);
  // A collective of `c` returned: the next computation phase begins. Only
  // an arrival-aware team's monitor is read (arrive, edge), and the clock
  // read costs a small call 45 ns under kvm-clock (np 2, 8-byte allreduce
  // of the slots 0.30 us; a tenth of a persistent one's Start + Wait): the
  // rest skip it.
  void returned(Collective c) {
    if (core_team.arrival_aware) monitor.returned(now(), c == Collective::allreduce);
  }

  // The arrival branch of an allreduce (with an arrival-aware one): this
  // rank's arrival published, then -- past the warm-up -- every rank's
  // prediction agreed on and compressed: the key to plan by (null: not
  // planned by arrival; `warmup` set during the warm-up, whose calls run the
  // team's default allreduce). Sets planned_arrival().
  const ArrivalKey* arrive(bool& warmup);
  void edge(double fraction);

  // ---- nonblocking and persistent calls (runtime/pending.hpp, request.cpp) ----
  // A call of `args` (its buffers and operator outlive it): started now,
  // or -- persistent -- planned now and started by Request::start.
  Request start(const CallArgs& args, bool persistent);
  // The runtime's call; this default refuses (UsageError).
  virtual std::shared_ptr<PendingCall> make_call(const CallArgs& args, bool persistent);
  // Queues `call` behind the outstanding ones and progresses them without
  // waiting. `owner`: a reference the queue keeps until the call is done (a
  // nonblocking call's, whose Request may go first); null for a persistent
  // call's start, whose Request holds it (and hands it over by adopt() if
  // it goes first) -- no reference count changes per start.
  void enqueue(PendingCall& call, std::shared_ptr<PendingCall> owner);
  // The last reference of a queued call, kept until the call is done.
  void adopt(std::shared_ptr<PendingCall> call) noexcept;
  // Progresses the outstanding calls in order (with `wait`: waiting) until
  // `until` is done (null: all of them); true once it is.
  bool progress(const PendingCall* until, bool wait);
  // Before a blocking collective: every outstanding call done.
  void drain() {
    if (head_ < outstanding_.size()) progress(nullptr, true);
  }
  // A persistent call made: room for every one made so far to be outstanding
  // at once, and 8 more calls (their starts then allocate nothing).
  void reserve_for_persistent() { outstanding_.reserve(++persistent_made_ + 8); }
  // A nonblocking or persistent call of one node through the direct
  // reduce's slots, where what a rank posts fits them and the configuration
  // leaves the algorithm to the selection (request.cpp's DirectCall; null
  // elsewhere): posted on its first progress, done once the posts it reads
  // are in (with `wait`: waiting). One shared-slot round, as the blocking
  // calls: a persistent 8-byte allreduce costs what a blocking one does,
  // and a reduce's or gather's other ranks, a scatter's or broadcast's
  // root, are done once posted.
  std::shared_ptr<PendingCall> direct_call(const CallArgs& args);
  bool progress_direct(const SlotCall& c, bool& posted, std::uint32_t& number, bool wait);

 protected:
  // How predictions travel: `value` is this rank's for allreduce `call`
  // (the monitor's, picoseconds since the team's origin).
  virtual void publish(std::int64_t call, Picos value) = 0;
  // Waits for every rank's value of `call` into `predicted` (the plans'
  // numbering), calling look() between polls (it throws to give up).
  virtual void collect(std::int64_t call, const std::function<void()>& look) = 0;
  // The ranks whose value of `call` is still missing (for wait reports).
  virtual std::vector<int> missing(std::int64_t call) = 0;
  // After a failed wait: takes back what collect() left open.
  virtual void cancel_collect() noexcept {}

 private:
  // The team has a direct reduce and the configuration leaves `c`'s
  // algorithm to the selection (asked once, not per call).
  bool leaves_choice_to_direct(Collective c) const { return (direct_choices_ >> static_cast<unsigned>(c)) & 1u; }
  std::uint32_t direct_choices_ = 0;
  bool direct_fits(Collective c, std::size_t bytes, bool sliced) const;
  // A nonblocking or persistent call's part through the slots, where it fits them.
  std::optional<SlotCall> slot_call(const CallArgs& args) const;
  bool reads_by_address(Collective c, std::size_t bytes) const;
  static std::size_t by_address_above(Collective c);
  // Elements [from, from + count) of the reduction of every rank's `total`.
  bool reduce_scatter_direct(const void* send, void* recv, std::size_t total, std::size_t from, std::size_t count,
                             const ReduceOp& op);
  // Runs body(direct) as the next call of collective `c`.
  template <class Body>
  void run_direct(Collective c, Body&& body);
  void agree_arrivals(std::int64_t call);
  void pop_outstanding() noexcept;
  struct Outstanding {
    PendingCall* call = nullptr;
    std::shared_ptr<PendingCall> owner;  // null: its Request holds it
  };
  std::vector<Outstanding> outstanding_;  // from head_ on, in the order started
  std::size_t persistent_made_ = 0;
  std::size_t head_ = 0;
};

// ---- buffers ----

inline const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }
inline std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }
inline void copy_bytes(void* to, const void* from, std::size_t bytes) {
  if (bytes > 0 && to != from) std::memmove(to, from, bytes);
}
// An out-of-place collective's input, for the executor to read where the
// working vector has not been written yet (RunInput) instead of a copy of
// all of it up front. None in place. `result_read` false: y is the caller's
// scratch, discarded after the run (RunInput::result_read).
inline RunInput input_of(const void* send, const void* y, std::size_t count, bool result_read = true) {
  if (send == y) return {};
  return {static_cast<const std::byte*>(send), count, result_read};
}
// The operator of the collectives that only move data (bcast, allgather,
// barrier): element size only (replace never combines).
ReduceOp data_op(DType dtype, std::size_t element_bytes);

// Calls body(offset, n) for consecutive pieces of at most `piece` of
// `count` elements -- once, with n = 0, for an empty vector, so that every
// rank runs (and agrees on) the same calls.
template <class Body>
void in_pieces(std::uint64_t count, std::uint64_t piece, Body&& body) {
  std::uint64_t offset = 0;
  do {
    const std::uint64_t n = count - offset < piece ? count - offset : piece;
    body(offset, n);
    offset += n;
  } while (offset < count);
}

// A scatter's, gather's or alltoall's user buffers and its schedule's working
// vector y (common/schedule.hpp: scatter and gather, p blocks, rank v's at
// v * n; alltoall, the p blocks to send then the p received), for the
// elements [at, at + n) of every block of `count` -- one piece of the call;
// at = 0 and n = count for a call in one piece. The user's buffers are
// significant as MPI says: scatter's send at the root only, gather's recv
// at the root only. In place (the same pointer as send and recv): scatter
// at the root leaves its block in send; gather at the root finds its block
// at recv + root * count; alltoall reads what it sends from recv, which
// load() copies out before the run and store() overwrites after it.
struct MovedBlocks {
  Collective collective = Collective::scatter;
  int ranks = 1, rank = 0, root = 0;
  std::uint64_t count = 0;  // elements per block, in the user's buffers
  std::size_t eb = 0;       // bytes per element

  // Whether `c`'s blocks move this way: scatter, gather and alltoall.
  static bool moves(Collective c) {
    return c == Collective::scatter || c == Collective::gather || c == Collective::alltoall;
  }
  // The areas of p blocks in y: alltoall's send and receive blocks, else one.
  std::uint64_t areas() const { return collective == Collective::alltoall ? 2 : 1; }
  // Elements of y for a piece of n per block.
  std::uint64_t vector(std::uint64_t n) const { return areas() * static_cast<std::uint64_t>(ranks) * n; }
  // This rank's input of the piece into y.
  void load(const void* send, const void* recv, std::byte* y, std::uint64_t at, std::uint64_t n) const;
  // This rank's result of the piece out of y.
  void store(const std::byte* y, const void* send, void* recv, std::uint64_t at, std::uint64_t n) const;

 private:
  // Copies element runs [at, at + n) of `blocks` blocks from a layout of
  // `from_stride` elements per block to one of `to_stride`.
  void blocks_across(const std::byte* from, std::uint64_t from_stride, std::byte* to, std::uint64_t to_stride,
                     std::uint64_t n) const;
};

// A reduce-scatter's blocks: rank v's counts[v] elements at displs[v] of the
// input, run as blocks of `block` (the largest count; the others padded).
struct BlockCounts {
  std::vector<std::uint64_t> counts, displs;
  std::uint64_t block = 0;
  bool equal = true;  // every count is `block`

  static BlockCounts uniform(int ranks, std::uint64_t count);
  // UsageError for a negative count.
  static BlockCounts of(const int* counts, int ranks);
  // The elements of every block together: a rank's whole input.
  std::uint64_t total() const { return displs.empty() ? 0 : displs.back() + counts.back(); }
  // Of the elements [at, at + n) of every block, how many rank v's holds.
  std::uint64_t real(std::size_t v, std::uint64_t at, std::uint64_t n) const {
    return counts[v] > at ? (counts[v] - at < n ? counts[v] - at : n) : 0;
  }
  // Copies the elements [at, at + n) of every block of `in` to
  // y + block_at(v), zeroing the padding (combined, never read).
  template <class BlockAt>
  void pack(const std::byte* in, std::byte* y, std::uint64_t at, std::uint64_t n, std::size_t eb,
            BlockAt&& block_at) const {
    for (std::size_t v = 0; v < counts.size(); ++v) {
      const std::uint64_t r = real(v, at, n);
      std::byte* to = y + block_at(static_cast<int>(v));
      copy_bytes(to, in + (displs[v] + at) * eb, r * eb);
      if (r < n) std::memset(to + r * eb, 0, (n - r) * eb);
    }
  }
};

}  // namespace copse
