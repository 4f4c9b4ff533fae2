// The heap policy of copse's test programs (Catch2's runner, the MPI test
// programs): memory they free stays theirs for the next case.
//
// Their cases allocate and free buffers of hundreds of KiB to MiB, case after
// case. glibc's defaults serve those from fresh mappings and hand freed memory
// at the heap's top back to the kernel (above 128 KiB), so every case
// page-faults its buffers in anew: the verifier's sweep over every root made
// 21,790 brk calls and 493,000 page faults, and in this machine's VM page
// faults are dear -- the default suite spent 244 s of system time beside 298 s
// of user time. Kept, the same sweep takes a quarter of its time.
//
// Only the test programs: the library never sets its host application's
// allocator, and the applications the interposer tests stand in for keep
// theirs. Under AddressSanitizer, whose allocator is its own, a no-op.
#pragma once

#include <malloc.h>

namespace copse::testing {

inline void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // buffers up to 32 MiB come from the heap (glibc's largest)
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // freed memory at the top of the heap stays mapped
  mallopt(M_TOP_PAD, 64 << 20);         // and the heap grows in steps of 64 MiB, not page by page
}

}  // namespace copse::testing
