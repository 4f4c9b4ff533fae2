// The nonblocking and persistent forms of bench/mpi_collectives.cpp's calls
// (its --forms): MPI_I<collective> and, where the MPI library has them, the
// MPI 4 persistent collectives -- Open MPI 4.1 exports them as
// MPIX_<Collective>_init in mpi-ext.h (OMPI_HAVE_MPI_EXT_PCOLLREQ). They are
// other code in the library than its blocking calls (Open MPI's libnbc, not
// its tuned component), so `copse tune` times them apart. The blocking calls
// are here too, so that one place says how a case becomes a call, through
// either entry (MPI_ or PMPI_).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "mpi_collectives_forms.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace mpi_collectives {

// The function `f` (an MPI_ name) through entry `e`: f itself, or the MPI
// library's own PMPI_f. Both have one type, so the conditional picks a
// function to call.
#define THROUGH(e, f) ((e) == Entry::pmpi ? P##f : f)

const char* form_name(Form form) {
  switch (form) {
    case Form::blocking: return "blocking";
    case Form::nonblocking: return "nonblocking";
    case Form::persistent: return "persistent";
  }
  return "?";
}

bool form_named(const std::string& name, Form& form) {
  for (Form f : {Form::blocking, Form::nonblocking, Form::persistent})
    if (name == form_name(f)) {
      form = f;
      return true;
    }
  return false;
}

int call_blocking(Entry e, const CallBuffers& b) {
  const int n = b.count;
  const MPI_Comm w = MPI_COMM_WORLD;
  switch (b.id) {
    case Id::allreduce: return THROUGH(e, MPI_Allreduce)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, w);
    case Id::reduce: return THROUGH(e, MPI_Reduce)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, b.root, w);
    case Id::bcast: return THROUGH(e, MPI_Bcast)(b.recv, n, MPI_FLOAT, b.root, w);
    case Id::barrier: return THROUGH(e, MPI_Barrier)(w);
    case Id::allgather: return THROUGH(e, MPI_Allgather)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, w);
    case Id::reduce_scatter_block:
      return THROUGH(e, MPI_Reduce_scatter_block)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, w);
    case Id::reduce_scatter:
      return THROUGH(e, MPI_Reduce_scatter)(b.send, b.recv, b.recv_counts, MPI_FLOAT, MPI_SUM, w);
    case Id::scatter: return THROUGH(e, MPI_Scatter)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, b.root, w);
    case Id::gather: return THROUGH(e, MPI_Gather)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, b.root, w);
    case Id::alltoall: return THROUGH(e, MPI_Alltoall)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, w);
  }
  return MPI_ERR_OTHER;
}

int start_nonblocking(Entry e, const CallBuffers& b, MPI_Request* request) {
  const int n = b.count;
  const MPI_Comm w = MPI_COMM_WORLD;
  switch (b.id) {
    case Id::allreduce: return THROUGH(e, MPI_Iallreduce)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, w, request);
    case Id::reduce: return THROUGH(e, MPI_Ireduce)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, b.root, w, request);
    case Id::bcast: return THROUGH(e, MPI_Ibcast)(b.recv, n, MPI_FLOAT, b.root, w, request);
    case Id::barrier: return THROUGH(e, MPI_Ibarrier)(w, request);
    case Id::allgather: return THROUGH(e, MPI_Iallgather)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, w, request);
    case Id::reduce_scatter_block:
      return THROUGH(e, MPI_Ireduce_scatter_block)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, w, request);
    case Id::reduce_scatter:
      return THROUGH(e, MPI_Ireduce_scatter)(b.send, b.recv, b.recv_counts, MPI_FLOAT, MPI_SUM, w, request);
    case Id::scatter: return THROUGH(e, MPI_Iscatter)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, b.root, w, request);
    case Id::gather: return THROUGH(e, MPI_Igather)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, b.root, w, request);
    case Id::alltoall: return THROUGH(e, MPI_Ialltoall)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, w, request);
  }
  return MPI_ERR_OTHER;
}

int start(Entry e, MPI_Request* request) { return THROUGH(e, MPI_Start)(request); }
int wait(Entry e, MPI_Request* request) { return THROUGH(e, MPI_Wait)(request, MPI_STATUS_IGNORE); }
int request_free(Entry e, MPI_Request* request) { return THROUGH(e, MPI_Request_free)(request); }

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
bool has_persistent() { return true; }

int init_persistent(Entry e, const CallBuffers& b, MPI_Request* request) {
  const int n = b.count;
  const MPI_Comm w = MPI_COMM_WORLD;
  const MPI_Info i = MPI_INFO_NULL;
  switch (b.id) {
    case Id::allreduce: return THROUGH(e, MPIX_Allreduce_init)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, w, i, request);
    case Id::reduce: return THROUGH(e, MPIX_Reduce_init)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, b.root, w, i, request);
    case Id::bcast: return THROUGH(e, MPIX_Bcast_init)(b.recv, n, MPI_FLOAT, b.root, w, i, request);
    case Id::barrier: return THROUGH(e, MPIX_Barrier_init)(w, i, request);
    case Id::allgather:
      return THROUGH(e, MPIX_Allgather_init)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, w, i, request);
    case Id::reduce_scatter_block:
      return THROUGH(e, MPIX_Reduce_scatter_block_init)(b.send, b.recv, n, MPI_FLOAT, MPI_SUM, w, i, request);
    case Id::reduce_scatter:
      return THROUGH(e, MPIX_Reduce_scatter_init)(b.send, b.recv, b.recv_counts, MPI_FLOAT, MPI_SUM, w, i, request);
    case Id::scatter:
      return THROUGH(e, MPIX_Scatter_init)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, b.root, w, i, request);
    case Id::gather:
      return THROUGH(e, MPIX_Gather_init)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, b.root, w, i, request);
    case Id::alltoall: return THROUGH(e, MPIX_Alltoall_init)(b.send, n, MPI_FLOAT, b.recv, n, MPI_FLOAT, w, i, request);
  }
  return MPI_ERR_OTHER;
}
#else
bool has_persistent() { return false; }
int init_persistent(Entry, const CallBuffers&, MPI_Request*) { return MPI_ERR_OTHER; }
#endif

#undef THROUGH

const char* sync_name(Sync sync) { return sync == Sync::p2p ? "p2p" : "barrier"; }

bool sync_named(const std::string& name, Sync& sync) {
  for (Sync s : {Sync::barrier, Sync::p2p})
    if (name == sync_name(s)) {
      sync = s;
      return true;
    }
  return false;
}

void line_up(Sync sync, int rank, int ranks) {
  if (sync == Sync::barrier) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  // Round k: a word to rank + 2^k, one from rank - 2^k; after ceil(log2 p)
  // rounds every rank has heard, through some chain, from every other.
  constexpr int kLineUpTag = 7106;  // beside mpi_collectives.cpp's 7101-7105
  for (int d = 1; d < ranks; d *= 2)
    MPI_Sendrecv(nullptr, 0, MPI_BYTE, (rank + d) % ranks, kLineUpTag, nullptr, 0, MPI_BYTE, (rank - d + ranks) % ranks,
                 kLineUpTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

}  // namespace mpi_collectives
