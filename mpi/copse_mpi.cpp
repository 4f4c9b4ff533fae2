// The C API (mpi/copse_mpi.h) over copse::mpi::Team, with the interposer's
// datatype and operator mapping and configuration.

#include "mpi/copse_mpi.h"

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "mpi/interposer.hpp"
#include "runtime/mpi_comm.hpp"

namespace ip = copse::mpi::interposer;
using copse::UsageError;

struct copse_comm {
  copse_team* team = nullptr;
  int thread = 0;
  copse::mpi::Comm* comm = nullptr;  // found when the thread first asks for it
};

struct copse_team {
  std::unique_ptr<copse::mpi::Team> team;  // null once MPI_Finalize has torn it down
  std::vector<copse_comm> comms;           // one per thread rank of this process
  int finalizer = -1;
};

namespace {

thread_local std::string t_message;

int code_of(copse::ErrorKind kind) {
  switch (kind) {
    case copse::ErrorKind::usage: return COPSE_ERR_USAGE;
    case copse::ErrorKind::schedule: return COPSE_ERR_SCHEDULE;
    case copse::ErrorKind::timeout: return COPSE_ERR_TIMEOUT;
    case copse::ErrorKind::aborted: return COPSE_ERR_ABORTED;
    case copse::ErrorKind::failed: return COPSE_ERR_FAILED;
    case copse::ErrorKind::system: break;
  }
  return COPSE_ERR_SYSTEM;
}

// Runs f as copse's own work (its MPI calls are not served again) and turns
// what it throws into a code and this thread's message.
template <class F>
int guarded(F&& f) {
  ip::Nested nested;
  try {
    f();
    return COPSE_SUCCESS;
  } catch (const copse::Error& e) {
    t_message = e.what();
    return code_of(e.kind());
  } catch (const std::bad_alloc&) {
    t_message = "out of memory";
    return COPSE_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    t_message = e.what();
    return COPSE_ERR_INTERNAL;
  }
}

copse::mpi::Mapping& mapping() {
  copse::mpi::Mapping* m = ip::mapping();
  if (!m)
    throw UsageError(
        "MPI is not initialised through libcopse_mpi.so (call MPI_Init after loading it, and before MPI_Finalize)");
  return *m;
}

std::string name_of(MPI_Datatype type) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int length = 0;
  if (type == MPI_DATATYPE_NULL || PMPI_Type_get_name(type, name, &length) != MPI_SUCCESS || length == 0)
    return "this datatype";
  return std::string(name, static_cast<std::size_t>(length));
}

const copse::mpi::ServedType& served_type(MPI_Datatype type) {
  const copse::mpi::ServedType* t = mapping().type(type);
  if (!t)
    throw UsageError(name_of(type) +
                     " is not a datatype copse serves (predefined integer and floating-point types, MPI_BYTE, "
                     "MPI_CHAR)");
  return *t;
}

const copse::ReduceOp* reduce_op(MPI_Datatype type, MPI_Op op) {
  const copse::mpi::ServedType& t = served_type(type);
  const copse::ReduceOp* reduce_op = mapping().op(op, t);
  if (!reduce_op)
    throw UsageError("the operator is not one copse serves on " + name_of(type) +
                     " (MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND, MPI_LOR where MPI "
                     "defines them, or MPI_Op_create's)");
  return reduce_op;
}

copse::mpi::Comm& comm_of(const copse_comm* c) {
  if (!c || !c->team) throw UsageError("the copse_comm is NULL");
  if (!c->comm) throw UsageError("the copse_comm was not obtained from copse_team_comm");
  if (!c->team->team) throw UsageError("the team was torn down by MPI_Finalize");
  return *c->comm;
}

// MPI_IN_PLACE or the receive buffer itself: in place.
const void* send_of(const void* send, void* recv) { return send == MPI_IN_PLACE ? recv : send; }

}  // namespace

extern "C" {

int copse_team_create(MPI_Comm comm, int threads, copse_team** team) {
  return guarded([&] {
    if (!team) throw UsageError("copse_team_create: the team argument is NULL");
    *team = nullptr;
    if (threads < 1) throw UsageError("a process brings at least one thread rank, got " + std::to_string(threads));
    (void)mapping();  // throws unless MPI_Init went through libcopse_mpi.so
    auto t = std::make_unique<copse_team>();
    t->team = std::make_unique<copse::mpi::Team>(comm, *ip::comm_options(), threads);
    t->comms.resize(static_cast<std::size_t>(threads));
    for (int i = 0; i < threads; ++i) t->comms[static_cast<std::size_t>(i)] = copse_comm{t.get(), i, nullptr};
    copse_team* raw = t.get();
    // A team still alive at MPI_Finalize must go before PMPI_Finalize.
    t->finalizer = ip::at_finalize([raw] { raw->team.reset(); });
    *team = t.release();
  });
}

int copse_team_free(copse_team* team) {
  return guarded([&] {
    if (!team) return;
    ip::forget_at_finalize(team->finalizer);
    delete team;
  });
}

int copse_team_comm(copse_team* team, int thread, copse_comm** comm) {
  return guarded([&] {
    if (!team || !comm) throw UsageError("copse_team_comm: NULL argument");
    if (!team->team) throw UsageError("the team was torn down by MPI_Finalize");
    if (thread < 0 || thread >= static_cast<int>(team->comms.size()))
      throw UsageError("thread " + std::to_string(thread) + " is not in [0, " + std::to_string(team->comms.size()) +
                       ")");
    copse_comm& c = team->comms[static_cast<std::size_t>(thread)];
    c.comm = &team->team->comm(thread);
    *comm = &c;
  });
}

int copse_comm_rank(const copse_comm* comm, int* rank) {
  return guarded([&] {
    if (!rank) throw UsageError("copse_comm_rank: rank is NULL");
    *rank = comm_of(comm).rank();
  });
}

int copse_comm_size(const copse_comm* comm, int* size) {
  return guarded([&] {
    if (!size) throw UsageError("copse_comm_size: size is NULL");
    *size = comm_of(comm).size();
  });
}

int copse_allreduce(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, MPI_Op op) {
  return guarded([&] { comm_of(comm).allreduce(send_of(send, recv), recv, count, *reduce_op(type, op)); });
}

int copse_reduce(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, MPI_Op op, int root) {
  return guarded([&] {
    copse::mpi::Comm& c = comm_of(comm);
    if (send == MPI_IN_PLACE && c.rank() != root) throw UsageError("MPI_IN_PLACE is the root's only, in a reduce");
    c.reduce(send_of(send, recv), recv, count, *reduce_op(type, op), root);
  });
}

int copse_bcast(copse_comm* comm, void* buffer, size_t count, MPI_Datatype type, int root) {
  return guarded([&] { comm_of(comm).bcast(buffer, count, served_type(type).dtype, root); });
}

int copse_barrier(copse_comm* comm) {
  return guarded([&] { comm_of(comm).barrier(); });
}

int copse_edge(copse_comm* comm, double fraction) {
  return guarded([&] { comm_of(comm).edge(fraction); });
}

int copse_allgather(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type) {
  return guarded([&] { comm_of(comm).allgather(send_of(send, recv), recv, count, served_type(type).dtype); });
}

int copse_reduce_scatter_block(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type,
                               MPI_Op op) {
  return guarded([&] { comm_of(comm).reduce_scatter_block(send_of(send, recv), recv, count, *reduce_op(type, op)); });
}

int copse_reduce_scatter(copse_comm* comm, const void* send, void* recv, const int* counts, MPI_Datatype type,
                         MPI_Op op) {
  return guarded([&] {
    if (!counts) throw UsageError("copse_reduce_scatter: counts is NULL");
    comm_of(comm).reduce_scatter(send_of(send, recv), recv, counts, *reduce_op(type, op));
  });
}

int copse_scatter(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, int root) {
  return guarded([&] {
    copse::mpi::Comm& c = comm_of(comm);
    if (recv == MPI_IN_PLACE && c.rank() != root) throw UsageError("MPI_IN_PLACE is the root's only, in a scatter");
    c.scatter(send, recv == MPI_IN_PLACE ? const_cast<void*>(send) : recv, count, served_type(type).dtype, root);
  });
}

int copse_gather(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, int root) {
  return guarded([&] {
    copse::mpi::Comm& c = comm_of(comm);
    if (send == MPI_IN_PLACE && c.rank() != root) throw UsageError("MPI_IN_PLACE is the root's only, in a gather");
    c.gather(send_of(send, recv), recv, count, served_type(type).dtype, root);
  });
}

int copse_alltoall(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type) {
  return guarded([&] { comm_of(comm).alltoall(send_of(send, recv), recv, count, served_type(type).dtype); });
}

int copse_allgatherv(copse_comm* comm, const void* send, void* recv, const int* counts, const int* displs,
                     MPI_Datatype type) {
  return guarded([&] { comm_of(comm).allgatherv(send_of(send, recv), recv, counts, displs, served_type(type).dtype); });
}

int copse_gatherv(copse_comm* comm, const void* send, size_t count, void* recv, const int* counts, const int* displs,
                  MPI_Datatype type, int root) {
  return guarded([&] {
    copse::mpi::Comm& c = comm_of(comm);
    if (send == MPI_IN_PLACE && c.rank() != root) throw UsageError("MPI_IN_PLACE is the root's only, in a gatherv");
    c.gatherv(send_of(send, recv), count, recv, counts, displs, served_type(type).dtype, root);
  });
}

int copse_scatterv(copse_comm* comm, const void* send, const int* counts, const int* displs, void* recv, size_t count,
                   MPI_Datatype type, int root) {
  return guarded([&] {
    copse::mpi::Comm& c = comm_of(comm);
    if (recv == MPI_IN_PLACE && c.rank() != root) throw UsageError("MPI_IN_PLACE is the root's only, in a scatterv");
    c.scatterv(send, counts, displs, recv == MPI_IN_PLACE ? const_cast<void*>(send) : recv, count,
               served_type(type).dtype, root);
  });
}

int copse_alltoallv(copse_comm* comm, const void* send, const int* send_counts, const int* send_displs, void* recv,
                    const int* recv_counts, const int* recv_displs, MPI_Datatype type) {
  return guarded([&] {
    comm_of(comm).alltoallv(send_of(send, recv), send_counts, send_displs, recv, recv_counts, recv_displs,
                            served_type(type).dtype);
  });
}

const char* copse_error_message(void) { return t_message.c_str(); }

const char* copse_error_name(int code) {
  switch (code) {
    case COPSE_SUCCESS: return "COPSE_SUCCESS";
    case COPSE_ERR_USAGE: return "COPSE_ERR_USAGE";
    case COPSE_ERR_SCHEDULE: return "COPSE_ERR_SCHEDULE";
    case COPSE_ERR_TIMEOUT: return "COPSE_ERR_TIMEOUT";
    case COPSE_ERR_ABORTED: return "COPSE_ERR_ABORTED";
    case COPSE_ERR_FAILED: return "COPSE_ERR_FAILED";
    case COPSE_ERR_SYSTEM: return "COPSE_ERR_SYSTEM";
    case COPSE_ERR_NO_MEMORY: return "COPSE_ERR_NO_MEMORY";
    case COPSE_ERR_INTERNAL: return "COPSE_ERR_INTERNAL";
    default: return "unknown";
  }
}

}  // extern "C"
