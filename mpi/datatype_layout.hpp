#pragma once
// How the interposer moves the bytes of any MPI datatype (bcast and
// allgather serve every datatype): a contiguous named one in place, the
// others packed (MPI_Pack) into private memory and unpacked after.

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "mpi/mapping.hpp"

namespace copse::mpi::interposer {

// How `count` elements of a datatype lie in memory, for the collectives that
// only move bytes.
struct Layout {
  bool contiguous = true;  // the bytes are the memory from the buffer's address on
  std::uint64_t bytes = 0;
  MPI_Count size = 0;  // of one element
  MPI_Aint extent = 0;
};

// The layout of `count` elements of `type`; nullopt where the MPI library is
// to report the arguments (a negative count, a null or unusable datatype).
std::optional<Layout> layout_of(const Mapping& m, MPI_Datatype type, int count);

// The address `bytes` past `base` (base may be MPI_BOTTOM).
void* advance(const void* base, std::int64_t bytes);

// `count` elements of `type` at `buffer` packed into `out` (l.bytes), and back.
void pack(const void* buffer, MPI_Count count, MPI_Datatype type, const Layout& l, std::byte* out, MPI_Comm comm);
void unpack(const std::byte* in, void* buffer, MPI_Count count, MPI_Datatype type, const Layout& l, MPI_Comm comm);

// Private memory of `bytes` (at least one), uninitialised.
std::unique_ptr<std::byte[]> scratch(std::uint64_t bytes);

}  // namespace copse::mpi::interposer
