#include "mpi/datatype_layout.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "common/error.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi::interposer {

std::optional<Layout> layout_of(const Mapping& m, MPI_Datatype type, int count) {
  if (count < 0 || type == MPI_DATATYPE_NULL) return std::nullopt;  // the MPI library's to report
  if (const ServedType* t = m.type(type)) {
    const auto size = static_cast<MPI_Count>(dtype_size(t->dtype));
    return Layout{true, static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(size), size, size};
  }
  int integers = 0, addresses = 0, datatypes = 0, combiner = 0;
  MPI_Count size = 0, lb = 0, extent = 0;
  if (PMPI_Type_get_envelope(type, &integers, &addresses, &datatypes, &combiner) != MPI_SUCCESS ||
      PMPI_Type_size_x(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent_x(type, &lb, &extent) != MPI_SUCCESS ||
      size < 0)
    return std::nullopt;
  // A derived datatype may hold its elements in any order, so only a named one
  // without gaps is its own bytes.
  const bool contiguous = combiner == MPI_COMBINER_NAMED && lb == 0 && extent == size;
  return Layout{contiguous, static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(size), size,
                static_cast<MPI_Aint>(extent)};
}

// The address `bytes` past `base` (base may be MPI_BOTTOM).
void* advance(const void* base, std::int64_t bytes) {
  return reinterpret_cast<void*>(reinterpret_cast<std::intptr_t>(base) + static_cast<std::intptr_t>(bytes));
}

namespace {

// MPI_Pack and MPI_Unpack count bytes in ints: whole elements at a time, at
// most INT_MAX bytes per piece.
template <class Piece>
void for_pieces(MPI_Count count, const Layout& l, Piece&& piece) {
  if (count == 0 || l.size == 0) return;
  if (l.size > INT_MAX)
    throw UsageError("one element of the datatype holds " + std::to_string(l.size) +
                     " bytes, more than MPI_Pack takes at once (2^31 - 1)");
  const MPI_Count per_piece = INT_MAX / l.size;
  for (MPI_Count first = 0; first < count;) {
    const MPI_Count n = std::min(per_piece, count - first);
    piece(first, static_cast<int>(n), static_cast<int>(n * l.size));
    first += n;
  }
}

}  // namespace

void pack(const void* buffer, MPI_Count count, MPI_Datatype type, const Layout& l, std::byte* out, MPI_Comm comm) {
  for_pieces(count, l, [&](MPI_Count first, int n, int bytes) {
    int position = 0;
    check_mpi(PMPI_Pack(advance(buffer, first * l.extent), n, type, out + first * l.size, bytes, &position, comm),
              "MPI_Pack");
  });
}

void unpack(const std::byte* in, void* buffer, MPI_Count count, MPI_Datatype type, const Layout& l, MPI_Comm comm) {
  for_pieces(count, l, [&](MPI_Count first, int n, int bytes) {
    int position = 0;
    check_mpi(PMPI_Unpack(in + first * l.size, bytes, &position, advance(buffer, first * l.extent), n, type, comm),
              "MPI_Unpack");
  });
}

std::unique_ptr<std::byte[]> scratch(std::uint64_t bytes) {
  return std::unique_ptr<std::byte[]>(new std::byte[std::max<std::uint64_t>(bytes, 1)]);
}

}  // namespace copse::mpi::interposer
