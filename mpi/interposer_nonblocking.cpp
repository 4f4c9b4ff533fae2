// The nonblocking and persistent collectives copse serves (mpi/interposer.hpp
// says which and when): the same decisions as the blocking calls', on a
// communicator whose Team already exists, and a copse request back.

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_*_init
#endif

#include <cstdint>
#include <memory>
#include <new>
#include <optional>

#include "mpi/datatype_layout.hpp"
#include "mpi/interposer_requests.hpp"

namespace copse::mpi::interposer {

namespace {

// A reduction's record when copse serves it (`bytes` per process) in `form`.
Record* reducing(State& s, MpiCollective c, const ReduceOp* op, std::uint64_t bytes, MPI_Comm comm, CallForm form) {
  if (!op || !s.in_bounds(bytes)) return nullptr;
  Record* r = with_team(s, comm);
  return r && s.table_serves(c, bytes, *r, form) ? r : nullptr;
}

int allreduce_call(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, Started how,
                   MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::allreduce;
  State* s = active();
  if (s && request && recv != MPI_IN_PLACE) {
    const ReduceOp* reduce_op = reduction(*s, c, count, type, op);
    if (Record* r = reducing(*s, c, reduce_op, reduce_op ? bytes_of(count, *reduce_op) : 0, comm, how.form())) {
      const void* from = send == MPI_IN_PLACE ? recv : send;
      const auto n = static_cast<std::size_t>(count);
      return serve(*s, c, how.name("MPI_Iallreduce", "MPIX_Allreduce_init"), *r, request, how.persistent,
                   [&](Comm& cc) {
                     return how.persistent ? cc.allreduce_init(from, recv, n, *reduce_op)
                                           : cc.iallreduce(from, recv, n, *reduce_op);
                   });
    }
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Iallreduce, Allreduce_init, send, recv, count, type, op, comm);
}

int reduce_call(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::reduce;
  State* s = active();
  if (s && request) {
    const ReduceOp* reduce_op = reduction(*s, c, count, type, op);
    if (Record* r = reducing(*s, c, reduce_op, reduce_op ? bytes_of(count, *reduce_op) : 0, comm, how.form()))
      // MPI_IN_PLACE is the root's only, as send buffer.
      if (root >= 0 && root < r->size && (r->rank == root ? recv != MPI_IN_PLACE : send != MPI_IN_PLACE))
        return serve(*s, c, how.name("MPI_Ireduce", "MPIX_Reduce_init"), *r, request, how.persistent, [&](Comm& cc) {
          const void* from = send == MPI_IN_PLACE ? recv : send;
          void* to = r->rank == root ? recv : nullptr;
          const auto n = static_cast<std::size_t>(count);
          return how.persistent ? cc.reduce_init(from, to, n, *reduce_op, root)
                                : cc.ireduce(from, to, n, *reduce_op, root);
        });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ireduce, Reduce_init, send, recv, count, type, op, root, comm);
}

int reduce_scatter_block_call(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                              Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::reduce_scatter_block;
  State* s = active();
  if (s && request && recv != MPI_IN_PLACE)
    if (const ReduceOp* reduce_op = reduction(*s, c, count, type, op))
      if (Record* r = with_team(*s, comm)) {
        const std::uint64_t bytes = bytes_of(count, *reduce_op) * static_cast<std::uint64_t>(r->size);
        if (s->serves(c, bytes, *r, how.form()))
          return serve(*s, c, how.name("MPI_Ireduce_scatter_block", "MPIX_Reduce_scatter_block_init"), *r, request,
                       how.persistent, [&](Comm& cc) {
                         const void* from = send == MPI_IN_PLACE ? recv : send;
                         const auto n = static_cast<std::size_t>(count);
                         return how.persistent ? cc.reduce_scatter_block_init(from, recv, n, *reduce_op)
                                               : cc.ireduce_scatter_block(from, recv, n, *reduce_op);
                       });
      }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ireduce_scatter_block, Reduce_scatter_block_init, send, recv, count, type, op, comm);
}

int reduce_scatter_call(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::reduce_scatter;
  State* s = active();
  if (s && request && recv != MPI_IN_PLACE && counts)
    if (const ReduceOp* reduce_op = reduction(*s, c, 0, type, op))
      if (Record* r = with_team(*s, comm)) {
        const auto total = counted_total(counts, r->size);
        if (total && s->serves(c, bytes_of(*total, *reduce_op), *r, how.form()))
          return serve(*s, c, how.name("MPI_Ireduce_scatter", "MPIX_Reduce_scatter_init"), *r, request, how.persistent,
                       [&](Comm& cc) {
                         const void* from = send == MPI_IN_PLACE ? recv : send;
                         return how.persistent ? cc.reduce_scatter_init(from, recv, counts, *reduce_op)
                                               : cc.ireduce_scatter(from, recv, counts, *reduce_op);
                       });
      }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ireduce_scatter, Reduce_scatter_init, send, recv, counts, type, op, comm);
}

int barrier_call(MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::barrier;
  State* s = active();
  if (s && request && s->options.mpi.serves(c))
    if (Record* r = with_team(*s, comm); r && s->table_serves(c, 0, *r, how.form()))
      return serve(*s, c, how.name("MPI_Ibarrier", "MPIX_Barrier_init"), *r, request, how.persistent,
                   [&](Comm& cc) { return how.persistent ? cc.barrier_init() : cc.ibarrier(); });
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ibarrier, Barrier_init, comm);
}

// The collectives that move bytes: contiguous datatypes only (packing would
// need a step after the last, at completion), as bytes.
int bcast_call(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::bcast;
  State* s = active();
  if (s && request && s->options.mpi.serves(c) && buffer != MPI_IN_PLACE)
    if (const auto l = layout_of(s->mapping, type, count); l && l->contiguous && s->in_bounds(l->bytes))
      if (Record* r = with_team(*s, comm);
          r && root >= 0 && root < r->size && s->table_serves(c, l->bytes, *r, how.form()))
        return serve(*s, c, how.name("MPI_Ibcast", "MPIX_Bcast_init"), *r, request, how.persistent, [&](Comm& cc) {
          return how.persistent ? cc.bcast_init(buffer, l->bytes, DType::uint8, root)
                                : cc.ibcast(buffer, l->bytes, DType::uint8, root);
        });
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ibcast, Bcast_init, buffer, count, type, root, comm);
}

int allgather_call(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                   MPI_Datatype recv_type, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::allgather;
  State* s = active();
  const bool in_place = send == MPI_IN_PLACE;
  if (s && request && s->options.mpi.serves(c) && recv != MPI_IN_PLACE) {
    const MovedLayouts l = equal_blocks(*s, in_place, send_count, send_type, recv_count, recv_type);
    const auto& block = l.block;
    if (l.fits() && l.contiguous() && s->in_bounds(block->bytes))
      if (Record* r = with_team(*s, comm); r && s->table_serves(c, block->bytes, *r, how.form()))
        return serve(*s, c, how.name("MPI_Iallgather", "MPIX_Allgather_init"), *r, request, how.persistent,
                     [&](Comm& cc) {
                       const void* from = in_place ? recv : send;
                       return how.persistent ? cc.allgather_init(from, recv, block->bytes, DType::uint8)
                                             : cc.iallgather(from, recv, block->bytes, DType::uint8);
                     });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Iallgather, Allgather_init, send, send_count, send_type, recv, recv_count, recv_type,
                            comm);
}

int scatter_call(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                 MPI_Datatype recv_type, int root, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::scatter;
  State* s = active();
  const bool in_place = recv == MPI_IN_PLACE;  // the root's only: its block stays in send
  MovedLayouts l;
  if (s && request)
    if (Record* r = rooted(*s, c, s->options.mpi.serves(c) ? with_team(*s, comm) : nullptr, root, in_place, recv_count,
                           recv_type, send_count, send_type, how.form(), l))
      return serve(*s, c, how.name("MPI_Iscatter", "MPIX_Scatter_init"), *r, request, how.persistent, [&](Comm& cc) {
        void* to = in_place ? const_cast<void*>(send) : recv;
        const std::uint64_t bytes = l.block->bytes;
        return how.persistent ? cc.scatter_init(send, to, bytes, DType::uint8, root)
                              : cc.iscatter(send, to, bytes, DType::uint8, root);
      });
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Iscatter, Scatter_init, send, send_count, send_type, recv, recv_count, recv_type, root,
                            comm);
}

int gather_call(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                MPI_Datatype recv_type, int root, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::gather;
  State* s = active();
  const bool in_place = send == MPI_IN_PLACE;  // the root's only: its block is at its place in recv
  MovedLayouts l;
  if (s && request)
    if (Record* r = rooted(*s, c, s->options.mpi.serves(c) ? with_team(*s, comm) : nullptr, root, in_place, send_count,
                           send_type, recv_count, recv_type, how.form(), l))
      return serve(*s, c, how.name("MPI_Igather", "MPIX_Gather_init"), *r, request, how.persistent, [&](Comm& cc) {
        const std::uint64_t bytes = l.block->bytes;
        const void* from = in_place ? recv : send;
        void* to = r->rank == root ? recv : nullptr;
        return how.persistent ? cc.gather_init(from, to, bytes, DType::uint8, root)
                              : cc.igather(from, to, bytes, DType::uint8, root);
      });
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Igather, Gather_init, send, send_count, send_type, recv, recv_count, recv_type, root,
                            comm);
}

int alltoall_call(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::alltoall;
  State* s = active();
  const bool in_place = send == MPI_IN_PLACE;  // the blocks to send are in recv
  if (s && request && s->options.mpi.serves(c) && recv != MPI_IN_PLACE) {
    const MovedLayouts l = equal_blocks(*s, in_place, send_count, send_type, recv_count, recv_type);
    const auto& block = l.block;
    if (l.fits() && l.contiguous())
      if (Record* r = with_team(*s, comm); r && s->serves(c, block->bytes, *r, how.form()))
        return serve(*s, c, how.name("MPI_Ialltoall", "MPIX_Alltoall_init"), *r, request, how.persistent,
                     [&](Comm& cc) {
                       const void* from = in_place ? recv : send;
                       return how.persistent ? cc.alltoall_init(from, recv, block->bytes, DType::uint8)
                                             : cc.ialltoall(from, recv, block->bytes, DType::uint8);
                     });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ialltoall, Alltoall_init, send, send_count, send_type, recv, recv_count, recv_type,
                            comm);
}

}  // namespace

Record* with_team(State& s, MPI_Comm comm) {
  Record* r = served_record(s, comm);
  return r && r->team ? r : nullptr;
}

void make_world_team() {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s || s->options.mpi.serve == 0) return;
  Nested nested;
  if (Record* r = record(*s, MPI_COMM_WORLD); r && !r->team)
    r->team = std::make_unique<Team>(MPI_COMM_WORLD, s->comm_options, 1);
}

// Each collective twice: nonblocking, and persistent (MPIX_*_init).
int iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
               MPI_Request* request) {
  return allreduce_call(send, recv, count, type, op, comm, {}, request);
}
int allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                   MPI_Request* request) {
  return allreduce_call(send, recv, count, type, op, comm, {true, info}, request);
}
int ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
            MPI_Request* request) {
  return reduce_call(send, recv, count, type, op, root, comm, {}, request);
}
int reduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Info info, MPI_Request* request) {
  return reduce_call(send, recv, count, type, op, root, comm, {true, info}, request);
}
int ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          MPI_Request* request) {
  return reduce_scatter_block_call(send, recv, count, type, op, comm, {}, request);
}
int reduce_scatter_block_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                              MPI_Info info, MPI_Request* request) {
  return reduce_scatter_block_call(send, recv, count, type, op, comm, {true, info}, request);
}
int ireduce_scatter(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request) {
  return reduce_scatter_call(send, recv, counts, type, op, comm, {}, request);
}
int reduce_scatter_init(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  return reduce_scatter_call(send, recv, counts, type, op, comm, {true, info}, request);
}
int ibarrier(MPI_Comm comm, MPI_Request* request) { return barrier_call(comm, {}, request); }
int barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return barrier_call(comm, {true, info}, request);
}
int ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  return bcast_call(buffer, count, type, root, comm, {}, request);
}
int bcast_init(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
               MPI_Request* request) {
  return bcast_call(buffer, count, type, root, comm, {true, info}, request);
}
int iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
               MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return allgather_call(send, send_count, send_type, recv, recv_count, recv_type, comm, {}, request);
}
int allgather_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                   MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return allgather_call(send, send_count, send_type, recv, recv_count, recv_type, comm, {true, info}, request);
}
int iscatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
             MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return scatter_call(send, send_count, send_type, recv, recv_count, recv_type, root, comm, {}, request);
}
int scatter_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                 MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return scatter_call(send, send_count, send_type, recv, recv_count, recv_type, root, comm, {true, info}, request);
}
int igather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
            MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return gather_call(send, send_count, send_type, recv, recv_count, recv_type, root, comm, {}, request);
}
int gather_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return gather_call(send, send_count, send_type, recv, recv_count, recv_type, root, comm, {true, info}, request);
}
int ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
              MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return alltoall_call(send, send_count, send_type, recv, recv_count, recv_type, comm, {}, request);
}
int alltoall_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return alltoall_call(send, send_count, send_type, recv, recv_count, recv_type, comm, {true, info}, request);
}

}  // namespace copse::mpi::interposer
