#pragma once
// The node arena: the one way the link engine reaches memory that other ranks
// touch (link words, flags, working buffers, staging scratch).
//
// Everything in an arena is named by an Offset from the arena's base, never
// by a pointer, so the same shared structures work whether the ranks are
// threads of one process or processes that each map a segment at a different
// address. address(offset) turns an offset into this process's pointer.
//
// Two arenas:
//  - HeapArena, for ranks that are threads (the emulator, Team/Comm). Its base
//    is address 0: the process's own address space is the "segment", so every
//    pointer of this process has an offset -- including a user's buffer, which
//    is what lets a thread rank work single-copy on the buffer it was given.
//    Memory comes from anonymous mmap, zeroed, untouched until used.
//  - ShmArena, for ranks that are processes: one Boost.Interprocess shared
//    memory segment of fixed size, mapped by every process wherever its kernel
//    puts it. Only memory inside the segment has an offset, so process ranks
//    copy their input into arena buffers and their result out (one copy each
//    way; the transfers between ranks stay single-copy). Allocation is a bump
//    pointer kept in the segment's header, so any process may allocate.
//
// Atomics placed in an arena must be lock-free and address-free
// (std::atomic<uint32_t> and <uint64_t> are, on Linux): in a ShmArena they are
// shared between processes, and futex waits on them must use the shared
// (non-private) futex operations -- cross_process() says which.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace boost::interprocess {
class mapped_region;
}

namespace copse {

class Arena {
 public:
  using Offset = std::uint64_t;

  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  virtual ~Arena() = default;

  // Reserves `bytes` aligned to `align` (a power of two, at most 4096) and
  // returns its offset. The memory is zeroed. Thread-safe. Throws
  // std::bad_alloc when the arena (or the machine) has no room.
  virtual Offset allocate(std::size_t bytes, std::size_t align = 64) = 0;

  // Whether [p, p + bytes) lies in this arena, i.e. may be named by an offset
  // (always true for a HeapArena).
  virtual bool contains(const void* p, std::size_t bytes) const = 0;

  // True when other processes map this memory: waits on its words must use
  // the shared futex operations (common/wait.hpp FutexScope::shared).
  virtual bool cross_process() const = 0;

  // Offsets and this process's addresses. Plain arithmetic on the base, so
  // they cost nothing on the hot path.
  std::byte* address(Offset offset) const { return reinterpret_cast<std::byte*>(base_ + offset); }
  Offset offset_of(const void* p) const { return reinterpret_cast<std::uintptr_t>(p) - base_; }
  template <class T>
  T* at(Offset offset) const {
    return reinterpret_cast<T*>(address(offset));
  }

 protected:
  std::uintptr_t base_ = 0;
};

// Threads: base 0, memory from anonymous mmap in chunks that are never moved
// or freed before the arena is (so an offset, once handed out, stays valid).
class HeapArena final : public Arena {
 public:
  HeapArena() = default;
  ~HeapArena() override;
  Offset allocate(std::size_t bytes, std::size_t align = 64) override;
  bool contains(const void*, std::size_t) const override { return true; }
  bool cross_process() const override { return false; }
  std::size_t mapped_bytes() const;  // total mapped so far

 private:
  struct Chunk {
    std::byte* data;
    std::size_t bytes;
  };
  mutable std::mutex mutex_;
  std::vector<Chunk> chunks_;
  std::byte* cursor_ = nullptr;  // free space of the current small-allocation chunk
  std::size_t left_ = 0;
  std::size_t mapped_ = 0;
};

// Processes: a Boost.Interprocess shared-memory segment (/dev/shm/<name> on
// Linux). The creator sizes it; others open it by name. The segment's header
// holds the allocation cursor and one `root` offset the creator publishes so
// that openers find the shared structures.
class ShmArena final : public Arena {
 public:
  struct Create {};
  struct Open {};
  // Creates the segment (it must not exist yet) with mode 0600 and every page
  // reserved up front, so that a full /dev/shm is this SystemError (naming
  // the segment and its size) rather than a SIGBUS at first touch.
  ShmArena(Create, const std::string& name, std::size_t bytes);
  // Opens and maps an existing segment read-write.
  ShmArena(Open, const std::string& name);
  ~ShmArena() override;  // unmaps; the segment itself stays until remove()

  // Removes the named segment (it disappears once every process has unmapped
  // it). False if there was none. Never throws.
  static bool remove(const std::string& name) noexcept;

  Offset allocate(std::size_t bytes, std::size_t align = 64) override;
  bool contains(const void* p, std::size_t bytes) const override;
  bool cross_process() const override { return true; }

  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  void set_root(Offset root);
  Offset root() const;

 private:
  struct Header;
  Header* header() const { return reinterpret_cast<Header*>(base_); }

  std::string name_;
  std::size_t size_ = 0;
  std::unique_ptr<boost::interprocess::mapped_region> region_;
};

}  // namespace copse
