#pragma once
// The direct shared-memory broadcast (issue 18, item 3), beside the direct
// reduce and in its region of the node's arena (DirectReduce::bcast): the
// root copies its vector into a ring of chunks in shared memory, a chunk at
// a time, and every other rank copies each chunk out as soon as its sequence
// word says it is there. No schedule, no tree, no rendezvous: a vector that
// fits the ring costs the root one copy and no wait at all, and each other
// rank one wait (for the root) and one copy; a larger one streams through
// the ring, the root refilling a chunk once every rank has read it. From
// kByAddressFromBytes, where the ranks may read each other's memory
// (threads; processes with cross-memory attach), each reader copies straight
// from the root's buffer instead.
//
// Why, beside the schedules: a tree's ranks wait for their parents one
// level after another, each wait on an oversubscribed node a trip through
// the scheduler, and each of its transfers a rendezvous. Measured under
// mpirun at np 4 on 2 cores (8-128 B), the binomial tree took 26-46 us per
// call where Open MPI's eager sends take 0.26 us: the root returns at once
// and the data waits for the late ranks. The ring does the same: timed
// between Open MPI's barriers (COPSE_MPI_SERVE=bcast), 0.32 us by median
// against Open MPI's 0.36-0.45. After copse's own barrier it is 9-14 us:
// that barrier lets the ranks leave up to a scheduler trip apart, and a
// reader that leaves before the root waits for it.
//
// Chunks are numbered across calls (the ranks count them alike: every
// rank makes the same calls), chunk c in ring slot c % kChunks. The root
// writes chunk c only once every rank has finished with chunk c - kChunks
// (its `done` word), so nobody's unread chunk is overwritten; a reader of
// chunk c waits until the slot's sequence word reaches c. A call of 0 bytes
// still passes one (empty) chunk, so a mismatched call is reported, not
// silently skipped.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/wait.hpp"

namespace copse {

struct DirectRank;  // transport/direct_reduce.hpp

// The one wait of the node's direct region: until the sequence word `word`
// reaches `at_least` (wrapping, compared by difference), spinning, then
// yielding or sleeping as `policy` says; meanwhile `me` names whom it waits
// for and why, for the wait report. The direct reduce's slots and the
// bcast's chunks both wait through it.
void await_sequence(DirectRank& me, const std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers,
                    std::uint32_t at_least, int whom, const char* what, const WaitPolicy& policy, FutexScope scope,
                    const SpinPolicy* spin);

// Copies `bytes` of a peer's vector at `from`, an address in process `pid`:
// memcpy where the peer is a thread of this process (`same_process`),
// process_vm_readv otherwise. A read the kernel refuses is a SystemError,
// "direct CALL: reading N bytes of ROLE WHOM (process PID) by
// process_vm_readv: ...". Returns the bytes read from another process. The
// direct region's reads by address (the bcast's, transport/direct_gather.hpp's)
// all go through it.
std::size_t read_from_peer(bool same_process, std::int32_t pid, const std::byte* from, std::byte* to, std::size_t bytes,
                           std::string_view call, std::string_view role, int whom);

class DirectBcast {
 public:
  // A chunk: small enough that the readers copy one while the root writes
  // the next, large enough that the per-chunk handshake is a small part of it.
  static constexpr std::size_t kChunkBytes = 32 << 10;
  static constexpr std::uint32_t kChunks = 16;  // the ring: 512 KiB without a wait for the root
  // Among threads of one process (FutexScope::process), and among processes
  // that may read each other's memory (`attach` below: process_vm_readv),
  // vectors from this size on are copied by each reader straight from the
  // root's buffer, whose address (and process) passes through one chunk's
  // header: one copy per reader instead of two, for a wait of the root until
  // every reader is done. From 16 KiB, as the link engine's attached sends
  // (LinkConfig::attach_from_bytes): at np 2, 32 KiB, the ring's two copies
  // took 8.9 us by median against Open MPI's 5.7 us single copy.
  static constexpr std::size_t kByAddressFromBytes = 16 << 10;

  // The bytes of the ring for `ranks` ranks (64-aligned), and its set-up at
  // `base` (64-aligned, in the team's arena).
  static std::size_t shared_bytes(int ranks);
  static void create_at(std::byte* base, int ranks);

  DirectBcast(std::byte* base, int ranks, FutexScope scope, const SpinPolicy* spin);

  // Rank me.rank's part of a broadcast of `bytes` bytes of `buffer` from
  // `root`: the root's bytes in every rank's buffer on return. Every rank
  // must make the same calls in the same order; a rank whose bytes or root
  // differ from the root's gets a ScheduleError (the caller aborts its team:
  // the ring's count is then out of step). Waits under `policy`. `attach`:
  // the ranks are processes that may read each other's memory (every rank
  // must pass the same); a read the kernel refuses is a SystemError.
  // Returns the bytes this rank read from another process by that read.
  std::size_t bcast(DirectRank& me, std::byte* buffer, std::size_t bytes, int root, const WaitPolicy& policy,
                    bool attach = false);

 private:
  struct Chunk;
  struct Reader;
  bool by_address(std::size_t bytes, bool attach) const {
    return (attach || scope_ == FutexScope::process) && bytes >= kByAddressFromBytes;
  }
  void write(DirectRank& me, const std::byte* buffer, std::size_t bytes, bool attach, const WaitPolicy& policy);
  // Both return the bytes read from another process by cross-memory attach.
  std::size_t read(DirectRank& me, std::byte* buffer, std::size_t bytes, int root, const WaitPolicy& policy);
  // By address: the whole vector from the root's buffer that `chunk` names.
  std::size_t read_source(const Chunk& chunk, std::byte* buffer, std::size_t bytes, int root) const;
  // The next chunk's slot, once every rank other than `me` is done with the
  // chunk it held before.
  Chunk& claim(DirectRank& me, std::uint32_t c, const WaitPolicy& policy);
  void publish(Chunk& chunk, std::uint32_t c, std::size_t bytes, int root, const std::byte* source);
  void await_done(DirectRank& me, std::uint32_t c, const char* what, const WaitPolicy& policy);

  int ranks_;
  FutexScope scope_;
  const SpinPolicy* spin_;
  std::int32_t pid_;  // this process's, asked once: getpid() is a system call per root's chunk otherwise
  Reader* readers_;
  Chunk* chunks_;
  std::byte* data_;
};

}  // namespace copse
