#pragma once
// The direct shared-memory reduce (issue 8, item 1): small vectors among the
// ranks of one node, in one round. Every rank copies its vector into its own
// slot in the node's arena, says so by bumping its call number, and then
// reads the slots of all T ranks, reducing them itself in rank order
// (x_0 ⊙ x_1 ⊙ ... ⊙ x_{T-1}, the same sequence of operations on every rank,
// so inexact floating-point results are bitwise identical everywhere).
//
// Why, beside the schedules: a schedule's exchanges are pairwise, so the
// fastest of them (recursive doubling) makes every rank wait log2 T times,
// each time for one particular peer to be scheduled. With more ranks than
// cores (T = 4 and 8 threads on 2 cores) each of those waits is a trip
// through the scheduler; here a rank waits once, for the last arrival, and
// the reads that follow need nobody else. Measured side by side on 2 cores,
// 8-byte float sum, back-to-back calls: T = 4 3.7 us against 6.2-12 us for
// the schedule, T = 8 8.3-16 us against 20-50 us. The cost is T slots read
// per rank (T^2 small reads in all), which is why it is for small vectors
// and small teams only (fits(), kMaxRanks).
//
// It is not a schedule and keeps no virtual clock: the simulator and the
// emulator never see it. A Team on one node without a virtual clock runs
// its small allreduces and its barriers here (runtime/comm.cpp,
// runtime/mpi_comm.cpp), and a thread Team its large allreduces in slices
// (allreduce_sliced: each rank reduces its 1/T slice straight from its
// peers' vectors, then copies the other slices from theirs).
//
// Reuse without a wait (worked for T = 2): each rank has two data buffers
// and call n uses buffer n % 2. Rank 0 may write call n + 2 into buffer
// n % 2 only once every rank has posted call n + 1, and rank 1 posts n + 1
// only after it has finished reading call n. So nobody overwrites a buffer a
// peer may still be reading, and a post never waits for readers. A call
// that waits for every post (an allreduce) leaves that known for the next;
// a one-sided call (a scatter's root, which reads nothing, returns right
// after its post, as Open MPI's eager sends do) leaves it to the next call,
// which first waits until every peer has posted the one-sided call -- and
// checks, a call late, that they posted the same collective, size and root.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "common/reduce_op.hpp"
#include "common/schedule.hpp"
#include "common/wait.hpp"
#include "transport/arena.hpp"
#include "transport/direct_bcast.hpp"

namespace copse {

// One rank's private side: its call count and, while it waits, whom for
// and since when (for the wait's messages).
struct DirectRank {
  int rank = 0;
  std::uint32_t calls = 0;
  // The last call every peer is known to have posted: `calls` after a call
  // that saw every post; behind it after a one-sided one (a scatter's root,
  // a gather's or a reduce's other ranks), until the next call sees them.
  std::uint32_t settled = 0;
  std::uint32_t bcast_chunks = 0;  // the broadcast ring's count (transport/direct_bcast.hpp)
  int waiting_for = -1;
  const char* waiting_what = "";  // e.g. "to post its vector"
  std::chrono::steady_clock::time_point wait_started;
};

class DirectReduce {
 public:
  // The largest vector one call reduces, in bytes. Measured on 2 cores
  // (back-to-back float sums, direct against the selected schedule): ahead
  // at T = 4 and 8 up to 2 KiB (2 KiB: 5-8 against 8-9 us at T = 4, 12-13
  // against 30-38 us at T = 8), level at T = 2; from 4 KiB on no longer
  // ahead everywhere.
  static constexpr std::size_t kSlotBytes = 2048;
  // The largest team it serves: each rank reads every slot.
  static constexpr int kMaxRanks = 32;
  static bool serves(int ranks) { return ranks >= 1 && ranks <= kMaxRanks; }
  static bool fits(int ranks, std::size_t bytes) { return serves(ranks) && bytes <= kSlotBytes; }
  // The room of each of a slot's two buffers: what one call posts at most
  // (exchange()). More than an allreduce takes: an allgather posts a rank's
  // block and a reduce-scatter its whole vector (transport/direct_gather.hpp),
  // and each rank reads T blocks, not T reduced vectors. Measured under
  // mpirun (scripts/bench-mpi.sh, two alternated runs, copse's medians):
  // at 4 and 8 KiB per rank the slots beat the schedules at np 2 (allgather
  // 2.8 and 4.5 against 3.1 and 5.3 us; reduce_scatter_block 2.1 and 3.2
  // against 2.6 and 3.8 us) and more so at np 4 on 2 cores (allgather 17-20
  // against 24-31 us, reduce_scatter_block 16-17 against 21-23 us). 16 KiB
  // per rank and T ranks: 32 T KiB of the node's arena.
  static constexpr std::size_t kPostBytes = 8192;
  static bool holds(int ranks, std::size_t bytes) { return serves(ranks) && bytes <= kPostBytes; }
  // A post of up to this many bytes travels in the slot's first cache line,
  // beside the call number that announces it.
  static constexpr std::size_t kInlineBytes = 16;
  // Vectors from this size on are reduced in slices (allreduce_sliced)
  // where the ranks are threads of one process. Measured on 2 cores against
  // the selected schedules (back-to-back float sums): level at T = 2 (the
  // same bytes move either way); at T = 4 and 8 ahead from 128 KiB (128 KiB:
  // 21 against 26-29 us at T = 4; 1 MiB: 93-109 against 110-122 us at T = 4,
  // 215-218 against 319-327 us at T = 8; 16 MiB: 4.0 against 5.2-6.6 ms and
  // 7.0-8.3 against 10.8-11.8 ms), mixed at 64 KiB.
  static constexpr std::size_t kSlicedFromBytes = 128 << 10;
  static bool slices(int ranks, std::size_t bytes) { return serves(ranks) && bytes >= kSlicedFromBytes; }

  // Places the slots of `ranks` ranks in `arena`, and the broadcast's ring
  // after them; returns their offset. They take at most shared_bytes(ranks)
  // of it.
  static Arena::Offset create_shared(Arena& arena, int ranks);
  static std::size_t shared_bytes(int ranks);
  static std::size_t reduce_bytes(int ranks);  // the slots' part of it

  // Attaches to slots made by create_shared. Waits spin under `spin` (null:
  // wait.cpp's default), as the node's link engine does.
  DirectReduce(Arena& arena, Arena::Offset shared, int ranks, const SpinPolicy* spin);

  int ranks() const { return ranks_; }

  // Rank me.rank's part of the next call: recv = the rank-order reduction
  // of every rank's `count` elements of `send` (recv may be send). With
  // count 0 (or no operator) it is a barrier. Every rank of the team must
  // make the same calls in the same order. Waits under `policy` (its
  // messages may read me.waiting_for); throws what the wait or the operator
  // throws, leaving the slots unusable (the caller aborts its team).
  void allreduce(DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count, const ReduceOp* op,
                 const WaitPolicy& policy);
  // The same for a vector of any size among threads of one process (a
  // HeapArena; UsageError otherwise), without copying it into the slots:
  // each rank reduces its 1/T slice straight from its peers' send vectors
  // into its receive vector (in rank order: bitwise the same result
  // wherever it is read), then copies the other slices from its peers'
  // receive vectors -- one read of every input and one of every result, as
  // a reduce-scatter and allgather move at least, in three waits whatever T.
  // The calls share the count with allreduce() and may alternate with it.
  void allreduce_sliced(DirectRank& me, const std::byte* send, std::byte* recv, std::size_t count, const ReduceOp& op,
                        const WaitPolicy& policy);

  // The slots' exchange, for the collectives built on them
  // (transport/direct_gather.hpp): copies the `bytes` of `vector` into
  // me's slot for its next call, posts it as a call of collective `c`, and
  // waits for the posts this rank reads (`reads`): every peer's, the root's
  // alone (a scatter's other ranks) or none (a rank that reads nothing: a
  // scatter's root, a gather's and a reduce's others). A peer that posted
  // another collective, another size or another `root` (-1 for
  // collectives without one) is a ScheduleError (sizes named in elements of
  // `element_bytes`) -- for a post this rank does not wait for, in the
  // ranks that read it, and in its own next call. Returns the call's
  // number; posted(q, call) then holds rank q's vector until me's next call
  // of the slots. A null `vector` posts its size alone (a scatter's ranks
  // but the root: only the root has data to post).
  enum class Reads { every_post, roots_post, nothing };
  std::uint32_t exchange(DirectRank& me, Collective c, const std::byte* vector, std::size_t bytes,
                         std::size_t element_bytes, const WaitPolicy& policy, int root = -1,
                         Reads reads = Reads::every_post);
  // exchange() in two halves, for a call that must not wait when it starts
  // (a nonblocking or persistent one, transport/direct_gather.hpp's
  // SlotCall): post_exchange posts, settling a one-sided call before it
  // first (waiting under `policy`: a start that must not wait asks
  // ready_to_post() first); exchange_posted says without waiting whether
  // the posts `reads` names are in; await_exchange waits for them and
  // checks them. exchange() is the first and the last.
  std::uint32_t post_exchange(DirectRank& me, Collective c, const std::byte* vector, std::size_t bytes, int root,
                              const WaitPolicy& policy) {
    return post_vector(me, c, vector, bytes, root, policy);
  }
  bool exchange_posted(const DirectRank& me, std::uint32_t call, Reads reads, int root) const {
    return reads == Reads::nothing || posts_in(me, call, only_read(reads, root));
  }
  void await_exchange(DirectRank& me, std::uint32_t call, Collective c, std::size_t bytes, std::size_t element_bytes,
                      const WaitPolicy& policy, int root, Reads reads) {
    if (reads != Reads::nothing) await_posts(me, call, c, bytes, element_bytes, policy, root, only_read(reads, root));
  }
  // Whether post_exchange may post without waiting: the call before, if it
  // was one-sided, is settled (every peer has posted it).
  bool ready_to_post(const DirectRank& me) const { return me.settled == me.calls || posts_in(me, me.calls, -1); }
  const std::byte* posted(int rank, std::uint32_t call) const;
  // recv = x_0 ⊙ x_1 ⊙ ... ⊙ x_{T-1} over elements [from, from + count) of
  // every rank's post of `call`, in rank order: the sequential reference's
  // order, so every rank and every collective built on the slots computes
  // the same bits for the same elements. recv may be this rank's input (the
  // slot holds its copy).
  void fold_posts(std::uint32_t call, std::size_t from, std::size_t count, const ReduceOp& op, std::byte* recv) const;

  // ---- By address (issue 18, item 4) ----
  //
  // Vectors too large for the slots are read where they lie: each rank
  // posts the address of its input (and its process) instead of a copy, the
  // readers copy what they need straight from there -- memcpy among threads
  // of one process, process_vm_readv among processes that may read each
  // other's memory (the caller knows; the kernel refusing is a SystemError)
  // -- and no rank returns, handing its vector back to its caller, while a
  // peer may still read it (release, await_released). One copy per byte
  // moved instead of the windows' two, and no handshake per block.
  //
  // share() posts the address of me's `bytes` of `input` as its next call
  // of collective `c` (`root`: a reduce's, else -1) and returns the call's
  // number; await_shares() waits for every peer's post of it and checks it
  // as exchange() does. The calls share the count with the slots' calls.
  std::uint32_t share(DirectRank& me, Collective c, const std::byte* input, std::size_t bytes, const WaitPolicy& policy,
                      int root = -1);
  // share() with a copy of `layout` in me's slot (what readers need to find
  // their part of `input`: a v-variant's counts and displacements; at most
  // kPostBytes), posted(me.rank, call) then; the sizes await_shares checks
  // are the layouts'. A null layout posts its size alone.
  std::uint32_t share(DirectRank& me, Collective c, const std::byte* input, const std::byte* layout,
                      std::size_t layout_bytes, int root, const WaitPolicy& policy);
  void await_shares(DirectRank& me, std::uint32_t call, Collective c, std::uint64_t bytes, std::size_t element_bytes,
                    const WaitPolicy& policy, int root = -1) {
    await_posts(me, call, c, bytes, element_bytes, policy, root);
  }
  // Rank q's shared input of `call` where this rank may load from it (threads
  // of one process); null among processes.
  const std::byte* shared_input(int q, std::uint32_t call) const;
  // Copies bytes [at, at + n) of rank q's shared input of `call` into `to`;
  // returns the bytes read from another process.
  std::size_t read_shared(int q, std::uint32_t call, std::size_t at, std::size_t n, std::byte* to) const;
  // me is done reading the shared inputs of `call`; await_released waits
  // until every peer is (`only` >= 0: that rank alone).
  void release(DirectRank& me, std::uint32_t call);
  void await_released(DirectRank& me, std::uint32_t call, const WaitPolicy& policy, int only = -1);
  // Whether every peer has released `call`, without waiting.
  bool all_released(const DirectRank& me, std::uint32_t call) const;

  // A broadcast among the same ranks, through the ring beside the slots
  // (DirectBcast::bcast). Its calls have their own count: they may come
  // between the reductions in any order. Returns the bytes this rank read
  // from another process by cross-memory attach.
  std::size_t bcast(DirectRank& me, std::byte* buffer, std::size_t bytes, int root, const WaitPolicy& policy,
                    bool attach = false) {
    return bcast_.bcast(me, buffer, bytes, root, policy, attach);
  }

 private:
  struct Slot;
  using Word = std::atomic<std::uint32_t> Slot::*;
  // Where rank's post of `call` lies: a vector of `bytes` up to kInlineBytes
  // in its slot's first cache line, a larger one in the buffer of the call's parity.
  std::byte* data(int rank, std::uint32_t call, std::uint64_t bytes) const;
  // The number of me's next call, once its buffers may be rewritten: every
  // peer has posted the call before it (waiting under `policy` after a
  // one-sided call, whose posts it then checks).
  std::uint32_t next_call(DirectRank& me, const WaitPolicy& policy);
  // exchange()'s first half: me's vector copied and posted as its next call.
  std::uint32_t post_vector(DirectRank& me, Collective c, const std::byte* vector, std::size_t bytes, int root,
                            const WaitPolicy& policy, const std::byte* input = nullptr);
  // Posts me's call `call` of collective `c`: its buffer's size, root and
  // (a call by address or in slices) its vectors' addresses and process,
  // written before the post that makes them visible.
  void announce(DirectRank& me, std::uint32_t call, Collective c, std::uint64_t bytes, int root,
                const std::byte* input = nullptr, std::byte* output = nullptr);
  void post(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers, std::uint32_t call);
  // Waits until every peer's `word` has reached `call`.
  void await_all(DirectRank& me, Word word, Word sleepers, std::uint32_t call, const char* what,
                 const WaitPolicy& policy);
  // The one rank whose post `reads` names (the root's), or -1: every peer's.
  static int only_read(Reads reads, int root) { return reads == Reads::roots_post ? root : -1; }
  // Whether every peer's `word` (`only` >= 0: that rank's) has reached
  // `call`, without waiting; posts_in: their posts.
  bool words_in(const DirectRank& me, Word word, std::uint32_t call, int only) const;
  bool posts_in(const DirectRank& me, std::uint32_t call, int only) const;
  // Every peer's post of `call` (`only` >= 0: that rank's alone), of
  // collective `c`, `bytes` and `root` as ours (else ScheduleError).
  void await_posts(DirectRank& me, std::uint32_t call, Collective c, std::uint64_t bytes, std::size_t eb,
                   const WaitPolicy& policy, int root = -1, int only = -1);

  int ranks_;
  FutexScope scope_;
  bool one_process_;
  std::int32_t pid_;  // this process's, for its shared inputs (asked once)
  const SpinPolicy* spin_;
  Slot* slots_;
  std::byte* data_;
  DirectBcast bcast_;
};

}  // namespace copse
