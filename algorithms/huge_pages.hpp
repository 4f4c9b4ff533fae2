#pragma once
// An allocator for the simulator's per-rank arrays at millions of ranks
// (issue 20). Partners in a tree or a butterfly sit far apart in rank order,
// so nearly every access to a partner's record lands on another 4 KiB page:
// at p = 2^24 the records span some 1 GiB, far beyond what the TLB maps, and
// the page walks cost as much as the cache misses. Asking Linux for
// transparent huge pages (2 MiB) for arrays of 4 MiB and more takes most of
// those walks away; elsewhere, or if the kernel declines, it is the plain
// allocator.

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace copse {

template <class T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = std::size_t{1} << 21;

  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT(google-explicit-constructor): rebinding

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < 2 * kHugePage) return static_cast<T*>(::operator new (bytes, std::align_val_t{alignof(T)}));
    const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* p = std::aligned_alloc(kHugePage, rounded);
    if (!p) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
    madvise(p, rounded, MADV_HUGEPAGE);  // a hint: failure leaves ordinary pages
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) {
    if (n * sizeof(T) < 2 * kHugePage)
      ::operator delete (p, std::align_val_t{alignof(T)});
    else
      std::free(p);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

// A vector whose large buffers sit on huge pages.
template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace copse
