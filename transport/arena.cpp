#include "transport/arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;  // small allocations share chunks of this size
constexpr std::size_t kHugeHint = std::size_t{8} << 20;    // ask for huge pages from this size on
constexpr std::size_t kMaxAlign = 4096;

void check_align(std::size_t align) {
  if (align == 0 || (align & (align - 1)) != 0 || align > kMaxAlign)
    throw UsageError("arena alignment must be a power of two of at most 4096, got " + std::to_string(align));
}

std::byte* map_anonymous(std::size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (bytes >= kHugeHint) madvise(p, bytes, MADV_HUGEPAGE);  // a hint (fewer page faults); failure is fine
  return static_cast<std::byte*>(p);
}

}  // namespace

// ---- HeapArena ------------------------------------------------------------------

HeapArena::~HeapArena() {
  for (const Chunk& c : chunks_) munmap(c.data, c.bytes);
}

Arena::Offset HeapArena::allocate(std::size_t bytes, std::size_t align) {
  check_align(align);
  if (bytes == 0) bytes = 1;
  std::lock_guard<std::mutex> lock(mutex_);
  // Large requests get their own mapping (page-aligned, so any align fits).
  if (bytes > kChunkBytes / 4) {
    const std::size_t size = round_up(bytes, 4096);
    std::byte* p = map_anonymous(size);
    chunks_.reserve(chunks_.size() + 1);
    chunks_.push_back(Chunk{p, size});
    mapped_ += size;
    return offset_of(p);
  }
  auto addr = reinterpret_cast<std::uintptr_t>(cursor_);
  std::size_t pad = round_up(addr, align) - addr;
  if (cursor_ == nullptr || pad + bytes > left_) {
    std::byte* p = map_anonymous(kChunkBytes);
    chunks_.reserve(chunks_.size() + 1);
    chunks_.push_back(Chunk{p, kChunkBytes});
    mapped_ += kChunkBytes;
    cursor_ = p;
    left_ = kChunkBytes;
    pad = 0;
  }
  std::byte* p = cursor_ + pad;
  cursor_ = p + bytes;
  left_ -= pad + bytes;
  return offset_of(p);
}

std::size_t HeapArena::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapped_;
}

// ---- ShmArena -------------------------------------------------------------------

namespace bip = boost::interprocess;

struct ShmArena::Header {
  static constexpr std::uint64_t kMagic = 0x636f707365617231ULL;  // "copsear1"
  std::atomic<std::uint64_t> magic;  // stored last (release): an opener that sees it sees the rest
  std::uint64_t size;
  std::atomic<std::uint64_t> used;  // the bump cursor (offset of the first free byte)
  std::atomic<std::uint64_t> root;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "shared atomics must be lock-free");

namespace {
constexpr std::size_t kHeaderBytes = 4096;  // the header has a page to itself
}

namespace {

// Fills this process's page table for the whole mapping now, while the team
// sets up, rather than a page at a time in its first collectives: each
// process maps the node's pages for itself, and the direct broadcast's ring,
// for one, spreads its first 16 calls over fresh chunks (np 2, a broadcast of
// 32 KiB through it: 27 us a call while it faults in, 2 us after). A kernel
// without MADV_POPULATE_WRITE (before Linux 5.14) leaves it to first touch.
void populate(void* base, std::size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  (void)madvise(base, bytes, MADV_POPULATE_WRITE);
#else
  (void)base;
  (void)bytes;
#endif
}

}  // namespace

ShmArena::ShmArena(Create, const std::string& name, std::size_t bytes) : name_(name) {
  size_ = round_up(bytes + kHeaderBytes, 4096);
  const std::string what =
      "cannot create the shared-memory segment '" + name + "' of " + std::to_string(size_) + " bytes";
  std::optional<bip::shared_memory_object> shm;
  try {
    // Owner only: the segment holds other ranks' data.
    shm.emplace(bip::create_only, name.c_str(), bip::read_write, bip::permissions(0600));
  } catch (const bip::interprocess_exception& e) {
    throw SystemError(what + ": " + e.what());  // not ours to remove: it may be another's
  }
  try {
    // Reserve every page now. A tmpfs segment that is merely truncated gets
    // its pages on first touch, so a full /dev/shm would kill a rank with
    // SIGBUS in the middle of a collective; reserved, it is this error.
    // (posix_fallocate also sets the size; new pages read as zero.)
    const int rc = posix_fallocate(shm->get_mapping_handle().handle, 0, static_cast<off_t>(size_));
    if (rc == EINVAL || rc == EOPNOTSUPP) {
      shm->truncate(static_cast<bip::offset_t>(size_));  // a file system that cannot reserve: pages on first touch
    } else if (rc != 0) {
      throw SystemError(what + ": " + std::strerror(rc) + (rc == ENOSPC ? " (/dev/shm is full or too small)" : ""));
    }
    region_ = std::make_unique<bip::mapped_region>(*shm, bip::read_write, 0, size_);
  } catch (const bip::interprocess_exception& e) {
    remove(name);
    throw SystemError(what + ": " + e.what());
  } catch (...) {
    remove(name);
    throw;
  }
  base_ = reinterpret_cast<std::uintptr_t>(region_->get_address());
  populate(region_->get_address(), size_);
  Header* h = new (region_->get_address()) Header{};
  h->size = size_;
  h->used.store(kHeaderBytes, std::memory_order_relaxed);
  h->root.store(0, std::memory_order_relaxed);
  h->magic.store(Header::kMagic, std::memory_order_release);
}

ShmArena::ShmArena(Open, const std::string& name) : name_(name) {
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_write);
    region_ = std::make_unique<bip::mapped_region>(shm, bip::read_write);
  } catch (const bip::interprocess_exception& e) {
    throw SystemError("cannot open the shared-memory segment '" + name + "': " + e.what());
  }
  base_ = reinterpret_cast<std::uintptr_t>(region_->get_address());
  size_ = region_->get_size();
  populate(region_->get_address(), size_);
  if (size_ < kHeaderBytes || header()->magic.load(std::memory_order_acquire) != Header::kMagic ||
      header()->size != size_)
    throw SystemError("the shared-memory segment '" + name + "' is not a copse arena");
}

ShmArena::~ShmArena() = default;

bool ShmArena::remove(const std::string& name) noexcept {
  try {
    return bip::shared_memory_object::remove(name.c_str());
  } catch (...) {
    return false;
  }
}

Arena::Offset ShmArena::allocate(std::size_t bytes, std::size_t align) {
  check_align(align);
  if (bytes == 0) bytes = 1;
  auto& used = header()->used;
  std::uint64_t old = used.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint64_t start = round_up(static_cast<std::size_t>(old), align);
    if (start > size_ || bytes > size_ - start) throw std::bad_alloc();
    if (used.compare_exchange_weak(old, start + bytes, std::memory_order_acq_rel)) return start;
  }
}

bool ShmArena::contains(const void* p, std::size_t bytes) const {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return a >= base_ + kHeaderBytes && a - base_ <= size_ && bytes <= size_ - (a - base_);
}

void ShmArena::set_root(Offset root) { header()->root.store(root, std::memory_order_release); }
Arena::Offset ShmArena::root() const { return header()->root.load(std::memory_order_acquire); }

}  // namespace copse
