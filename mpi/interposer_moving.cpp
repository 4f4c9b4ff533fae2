// The intercepted collectives that only move bytes: bcast, allgather,
// scatter, gather and alltoall (mpi/interposer.hpp says when a call is
// served). Any datatype is served, as bytes: a contiguous named one in
// place, the others packed (MPI_Pack) into private memory and unpacked after
// (mpi/datatype_layout.hpp). MPI lets processes describe the same bytes
// with different datatypes, so every decision rests on byte counts, which
// MPI requires to agree, never on a datatype handle: processes that decided
// differently would never meet.

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "mpi/datatype_layout.hpp"
#include "mpi/interposer_state.hpp"

namespace copse::mpi::interposer {

namespace {

// Packs `count` elements of `type` at `buffer` into new private memory, or
// null (and nothing) when the layout is contiguous.
std::unique_ptr<std::byte[]> packed_copy(const void* buffer, MPI_Count count, MPI_Datatype type, const Layout& l,
                                         MPI_Comm comm) {
  if (l.contiguous) return nullptr;
  auto out = scratch(static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(l.size));
  pack(buffer, count, type, l, out.get(), comm);
  return out;
}

}  // namespace

MovedLayouts equal_blocks(const State& s, bool in_place, int send_count, MPI_Datatype send_type, int recv_count,
                          MPI_Datatype recv_type) {
  MovedLayouts l;
  l.block = layout_of(s.mapping, recv_type, recv_count);
  l.other = in_place ? l.block : layout_of(s.mapping, send_type, send_count);
  return l;
}

Record* rooted(State& s, MpiCollective c, Record* r, int root, bool in_place, int own_count, MPI_Datatype own_type,
               int root_count, MPI_Datatype root_type, CallForm form, MovedLayouts& l) {
  if (!r || root < 0 || root >= r->size || (in_place && r->rank != root)) return nullptr;  // MPI_IN_PLACE: the root's
  const bool at_root = r->rank == root;
  l.other = at_root ? layout_of(s.mapping, root_type, root_count) : std::nullopt;
  l.block = in_place ? l.other : layout_of(s.mapping, own_type, own_count);
  if (!at_root) l.other = l.block;
  const bool contiguous = form != CallForm::blocking;
  return l.fits() && (!contiguous || l.contiguous()) && s.serves(c, l.block->bytes, *r, form) ? r : nullptr;
}

int bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::bcast;
  State* s = active();
  if (!s) return PMPI_Bcast(buffer, count, type, root, comm);
  const TraceScope trace(s->tracer.get(), c, comm, count, type, MPI_OP_NULL, root);
  if (s->options.mpi.serves(c) && buffer != MPI_IN_PLACE)
    if (const auto layout = layout_of(s->mapping, type, count); layout && s->in_bounds(layout->bytes))
      if (Record* r = record(*s, comm); r && root >= 0 && root < r->size && s->table_serves(c, layout->bytes, *r))
        return run(*s, c, "MPI_Bcast", *r, [&](Comm& cc) {
          if (layout->contiguous) {
            cc.bcast(buffer, layout->bytes, DType::uint8, root);
            return;
          }
          const auto packed = scratch(layout->bytes);
          if (r->rank == root) pack(buffer, count, type, *layout, packed.get(), r->comm);
          cc.bcast(packed.get(), layout->bytes, DType::uint8, root);
          if (r->rank != root) unpack(packed.get(), buffer, count, type, *layout, r->comm);
        });
  s->stats.passed(c);
  return PMPI_Bcast(buffer, count, type, root, comm);
}

int allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
              MPI_Datatype recv_type, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::allgather;
  State* s = active();
  if (!s) return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
  const TraceScope trace(s->tracer.get(), c, comm, recv_count, recv_type, MPI_OP_NULL, -1);
  const bool in_place = send == MPI_IN_PLACE;
  if (s->options.mpi.serves(c) && recv != MPI_IN_PLACE) {
    // One process's block, which is also what it contributes: the same bytes
    // on every process, whatever datatypes describe them.
    const MovedLayouts l = equal_blocks(*s, in_place, send_count, send_type, recv_count, recv_type);
    const auto& block = l.block;
    const auto& mine = l.other;
    if (l.fits() && s->in_bounds(block->bytes))
      if (Record* r = record(*s, comm); r && s->table_serves(c, block->bytes, *r))
        return run(*s, c, "MPI_Allgather", *r, [&](Comm& cc) {
          const std::uint64_t bytes = block->bytes;
          const auto ranks = static_cast<MPI_Count>(r->size);
          std::unique_ptr<std::byte[]> packed_send, packed_recv;
          void* to = recv;  // every block, as bytes
          if (!block->contiguous) {
            packed_recv = scratch(bytes * static_cast<std::uint64_t>(ranks));
            to = packed_recv.get();
          }
          const void* from = send;  // this process's block, as bytes
          if (in_place) {
            if (!block->contiguous)
              pack(advance(recv, r->rank * MPI_Count{recv_count} * block->extent), recv_count, recv_type, *block,
                   packed_recv.get() + r->rank * bytes, r->comm);
            from = to;
          } else if ((packed_send = packed_copy(send, send_count, send_type, *mine, r->comm))) {
            from = packed_send.get();
          }
          cc.allgather(from, to, bytes, DType::uint8);
          if (!block->contiguous) unpack(packed_recv.get(), recv, ranks * recv_count, recv_type, *block, r->comm);
        });
  }
  s->stats.passed(c);
  return PMPI_Allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

int scatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
            MPI_Datatype recv_type, int root, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::scatter;
  State* s = active();
  if (!s) return PMPI_Scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
  const bool in_place = recv == MPI_IN_PLACE;  // MPI allows it at the root only
  const TraceScope trace(s->tracer.get(), c, comm, in_place ? send_count : recv_count, in_place ? send_type : recv_type,
                         MPI_OP_NULL, root);
  MovedLayouts l;
  if (Record* r = rooted(*s, c, s->options.mpi.serves(c) ? record(*s, comm) : nullptr, root, in_place, recv_count,
                         recv_type, send_count, send_type, CallForm::blocking, l)) {
    const bool at_root = r->rank == root;
    return run(*s, c, "MPI_Scatter", *r, [&](Comm& cc) {
      const auto ranks = static_cast<MPI_Count>(r->size);
      std::unique_ptr<std::byte[]> packed_send, packed_recv;
      const void* from = send;
      if (at_root && (packed_send = packed_copy(send, ranks * send_count, send_type, *l.other, r->comm)))
        from = packed_send.get();
      void* to = in_place ? const_cast<void*>(from) : recv;  // in place: the root's block stays in send
      if (!in_place && !l.block->contiguous) to = (packed_recv = scratch(l.block->bytes)).get();
      cc.scatter(from, to, l.block->bytes, DType::uint8, root);
      if (packed_recv) unpack(packed_recv.get(), recv, recv_count, recv_type, *l.block, r->comm);
    });
  }
  s->stats.passed(c);
  return PMPI_Scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
}

int gather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count, MPI_Datatype recv_type,
           int root, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::gather;
  State* s = active();
  if (!s) return PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
  const bool in_place = send == MPI_IN_PLACE;  // MPI allows it at the root only
  const TraceScope trace(s->tracer.get(), c, comm, in_place ? recv_count : send_count, in_place ? recv_type : send_type,
                         MPI_OP_NULL, root);
  MovedLayouts l;
  if (Record* r = rooted(*s, c, s->options.mpi.serves(c) ? record(*s, comm) : nullptr, root, in_place, send_count,
                         send_type, recv_count, recv_type, CallForm::blocking, l)) {
    const bool at_root = r->rank == root;
    return run(*s, c, "MPI_Gather", *r, [&](Comm& cc) {
      const std::uint64_t bytes = l.block->bytes;
      const auto ranks = static_cast<MPI_Count>(r->size);
      std::unique_ptr<std::byte[]> packed_send, packed_recv;
      void* to = at_root ? recv : nullptr;  // elsewhere insignificant
      if (at_root && !l.other->contiguous)
        to = (packed_recv = scratch(bytes * static_cast<std::uint64_t>(ranks))).get();
      const void* from = send;
      if (in_place) {  // the root's block is at its place in recv
        if (packed_recv)
          pack(advance(recv, r->rank * MPI_Count{recv_count} * l.other->extent), recv_count, recv_type, *l.other,
               packed_recv.get() + static_cast<std::uint64_t>(r->rank) * bytes, r->comm);
        from = to;
      } else if ((packed_send = packed_copy(send, send_count, send_type, *l.block, r->comm))) {
        from = packed_send.get();
      }
      cc.gather(from, to, bytes, DType::uint8, root);
      if (packed_recv) unpack(packed_recv.get(), recv, ranks * recv_count, recv_type, *l.other, r->comm);
    });
  }
  s->stats.passed(c);
  return PMPI_Gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
}

int alltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
             MPI_Datatype recv_type, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::alltoall;
  State* s = active();
  if (!s) return PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm);
  const TraceScope trace(s->tracer.get(), c, comm, recv_count, recv_type, MPI_OP_NULL, -1);
  const bool in_place = send == MPI_IN_PLACE;  // the blocks to send are in recv
  if (s->options.mpi.serves(c) && recv != MPI_IN_PLACE) {
    // The block this process receives from each, and the one it sends each.
    const MovedLayouts l = equal_blocks(*s, in_place, send_count, send_type, recv_count, recv_type);
    if (l.fits())
      if (Record* r = record(*s, comm);
          r && s->serves(c, l.block->bytes, *r))  // by its block, as `copse tune` times it
        return run(*s, c, "MPI_Alltoall", *r, [&](Comm& cc) {
          const auto ranks = static_cast<MPI_Count>(r->size);
          std::unique_ptr<std::byte[]> packed_send, packed_recv;
          const std::uint64_t bytes = l.block->bytes * static_cast<std::uint64_t>(ranks);
          void* to = recv;
          if (!l.block->contiguous) to = (packed_recv = scratch(bytes)).get();
          const void* from = to;  // in place
          if (in_place && packed_recv) {
            pack(recv, ranks * recv_count, recv_type, *l.block, packed_recv.get(), r->comm);
          } else if (!in_place) {
            from = send;
            if ((packed_send = packed_copy(send, ranks * send_count, send_type, *l.other, r->comm)))
              from = packed_send.get();
          }
          cc.alltoall(from, to, l.block->bytes, DType::uint8);
          if (packed_recv) unpack(packed_recv.get(), recv, ranks * recv_count, recv_type, *l.block, r->comm);
        });
  }
  s->stats.passed(c);
  return PMPI_Alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

}  // namespace copse::mpi::interposer
