#include "transport/direct_bcast.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "common/error.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/link_engine.hpp"

namespace copse {

// A rank's word, on a cache line of its own that roots poll: the last chunk
// it is done with (read, or written as the root).
struct alignas(64) DirectBcast::Reader {
  std::atomic<std::uint32_t> done{0};
  std::atomic<std::uint32_t> sleepers{0};
};

// A ring slot's header: the last chunk written to it, and -- written before
// that word, and not rewritten while a reader may look -- the size and root
// of the call it belongs to (checked by readers on a call's first chunk).
struct alignas(64) DirectBcast::Chunk {
  std::atomic<std::uint32_t> written{0};
  std::atomic<std::uint32_t> sleepers{0};
  std::uint64_t call_bytes = 0;
  std::int32_t root = -1;
  const std::byte* source = nullptr;  // by address: the root's buffer (else null: the data is in the slot)
  std::int32_t pid = 0;               // ... in this process (a thread team: ours)
};

std::size_t DirectBcast::shared_bytes(int ranks) {
  return static_cast<std::size_t>(ranks < 0 ? 0 : ranks) * sizeof(Reader) + kChunks * (sizeof(Chunk) + kChunkBytes);
}

void DirectBcast::create_at(std::byte* base, int ranks) {
  for (int r = 0; r < ranks; ++r) new (base + static_cast<std::size_t>(r) * sizeof(Reader)) Reader{};
  base += static_cast<std::size_t>(ranks) * sizeof(Reader);
  for (std::uint32_t k = 0; k < kChunks; ++k) new (base + k * sizeof(Chunk)) Chunk{};
}

DirectBcast::DirectBcast(std::byte* base, int ranks, FutexScope scope, const SpinPolicy* spin)
    : ranks_(ranks), scope_(scope), spin_(spin), pid_(static_cast<std::int32_t>(getpid())) {
  readers_ = std::launder(reinterpret_cast<Reader*>(base));
  base += static_cast<std::size_t>(ranks) * sizeof(Reader);
  chunks_ = std::launder(reinterpret_cast<Chunk*>(base));
  data_ = base + kChunks * sizeof(Chunk);
}

void await_sequence(DirectRank& me, const std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& sleepers,
                    std::uint32_t at_least, int whom, const char* what, const WaitPolicy& policy, FutexScope scope,
                    const SpinPolicy* spin) {
  // Sequence numbers wrap; they are compared by their difference.
  const auto reached = [at_least](std::uint32_t seen) { return static_cast<std::int32_t>(seen - at_least) >= 0; };
  std::uint32_t seen = word.load(std::memory_order_acquire);
  if (reached(seen)) return;
  me.waiting_for = whom;
  me.waiting_what = what;
  me.wait_started = std::chrono::steady_clock::now();
  while (!reached(seen)) seen = wait_while_equal(word, seen, policy, scope, &sleepers, spin);
  me.waiting_for = -1;
}

std::size_t DirectBcast::bcast(DirectRank& me, std::byte* buffer, std::size_t bytes, int root, const WaitPolicy& policy,
                               bool attach) {
  std::size_t attached = 0;
  if (me.rank == root)
    write(me, buffer, bytes, attach, policy);
  else
    attached = read(me, buffer, bytes, root, policy);
  Reader& mine = readers_[me.rank];
  mine.done.store(me.bcast_chunks, std::memory_order_release);
  wake_all(mine.done, scope_, &mine.sleepers);
  return attached;
}

DirectBcast::Chunk& DirectBcast::claim(DirectRank& me, std::uint32_t c, const WaitPolicy& policy) {
  await_done(me, c - kChunks, "to read an earlier broadcast", policy);
  return chunks_[c % kChunks];
}

void DirectBcast::await_done(DirectRank& me, std::uint32_t c, const char* what, const WaitPolicy& policy) {
  for (int q = 0; q < ranks_; ++q)
    if (q != me.rank) await_sequence(me, readers_[q].done, readers_[q].sleepers, c, q, what, policy, scope_, spin_);
}

void DirectBcast::publish(Chunk& chunk, std::uint32_t c, std::size_t bytes, int root, const std::byte* source) {
  chunk.call_bytes = bytes;
  chunk.root = root;
  chunk.source = source;
  chunk.pid = pid_;
  chunk.written.store(c, std::memory_order_release);
  wake_all(chunk.written, scope_, &chunk.sleepers);
}

void DirectBcast::write(DirectRank& me, const std::byte* buffer, std::size_t bytes, bool attach,
                        const WaitPolicy& policy) {
  if (by_address(bytes, attach)) {
    const std::uint32_t c = ++me.bcast_chunks;
    publish(claim(me, c, policy), c, bytes, me.rank, buffer);
    // The caller may change its buffer once we return.
    await_done(me, c, "to read the vector", policy);
    return;
  }
  std::size_t at = 0;
  do {
    const std::uint32_t c = ++me.bcast_chunks;
    Chunk& chunk = claim(me, c, policy);
    const std::size_t n = std::min(kChunkBytes, bytes - at);
    if (n > 0) std::memcpy(data_ + (c % kChunks) * kChunkBytes, buffer + at, n);
    publish(chunk, c, bytes, me.rank, nullptr);
    at += n;
  } while (at < bytes);
}

std::size_t read_from_peer(bool same_process, std::int32_t pid, const std::byte* from, std::byte* to, std::size_t bytes,
                           std::string_view call, std::string_view role, int whom) {
  if (same_process) {
    std::memcpy(to, from, bytes);
    return 0;
  }
  if (const int error = cross_memory_read(pid, reinterpret_cast<std::uintptr_t>(from), to, bytes); error != 0)
    throw SystemError("direct " + std::string(call) + ": reading " + std::to_string(bytes) + " bytes of " +
                      std::string(role) + " " + std::to_string(whom) + " (process " + std::to_string(pid) +
                      ") by process_vm_readv: " + std::strerror(error));
  return bytes;
}

std::size_t DirectBcast::read_source(const Chunk& chunk, std::byte* buffer, std::size_t bytes, int root) const {
  return read_from_peer(scope_ == FutexScope::process, chunk.pid, chunk.source, buffer, bytes, "bcast", "root", root);
}

std::size_t DirectBcast::read(DirectRank& me, std::byte* buffer, std::size_t bytes, int root,
                              const WaitPolicy& policy) {
  std::size_t at = 0;
  do {
    const std::uint32_t c = ++me.bcast_chunks;
    const std::uint32_t slot = c % kChunks;
    Chunk& chunk = chunks_[slot];
    await_sequence(me, chunk.written, chunk.sleepers, c, root, "to write its vector", policy, scope_, spin_);
    if (at == 0 && (chunk.call_bytes != bytes || chunk.root != root))
      throw ScheduleError("mismatched broadcasts: rank " + std::to_string(me.rank) + " expects " +
                          std::to_string(bytes) + " bytes from root " + std::to_string(root) + ", rank " +
                          std::to_string(chunk.root) + " broadcasts " + std::to_string(chunk.call_bytes) + " bytes");
    if (chunk.source) return read_source(chunk, buffer, bytes, root);  // by address: all of it, from the root's buffer
    const std::size_t n = std::min(kChunkBytes, bytes - at);
    if (n > 0) std::memcpy(buffer + at, data_ + slot * kChunkBytes, n);
    // Tells a root waiting for this slot (only the last chunk of a call
    // tells the others that are not waiting: bcast() posts it).
    if (at + n < bytes) {
      Reader& mine = readers_[me.rank];
      mine.done.store(c, std::memory_order_release);
      wake_all(mine.done, scope_, &mine.sleepers);
    }
    at += n;
  } while (at < bytes);
  return 0;
}

}  // namespace copse
