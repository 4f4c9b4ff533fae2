#pragma once
// The heart of libcopse_mpi.so: each intercepted MPI collective is either
// served by copse or handed unchanged to the MPI library's PMPI_ function.
// The C bindings (bindings_c.cpp), the Fortran spellings
// (bindings_fortran.cpp) and the C API (copse_mpi.cpp) all come here.
//
// A call is served when every one of these holds, and passed otherwise:
//   - MPI_Init or MPI_Init_thread went through this library, MPI_Finalize has
//     not yet, and the call is the application's (copse's own MPI calls,
//     made while copse serves a call, always go to the MPI library);
//   - mpi.serve names the collective;
//   - reductions: the datatype and operator are copse's (mpi/mapping.hpp),
//     and an operator that does not commute meets an algorithm that keeps
//     rank order (collectives.* names one that does not: passed, not failed);
//   - bcast, allgather, scatter, gather and alltoall move bytes, so any
//     datatype is served: named contiguous ones in place, the others packed
//     (MPI_Pack) and unpacked;
//     a decision from the datatype handle would not do, because MPI lets
//     processes describe the same bytes with different datatypes, and
//     processes that decided differently would never meet;
//   - the communicator is an intracommunicator of more than one process;
//   - the bytes each process contributes (count x size; allgather, scatter,
//     gather and alltoall: one block; reduce_scatter: its whole input) are
//     within mpi.min_bytes and mpi.max_bytes (barrier: always);
//   - the arguments are ones MPI accepts (count >= 0, root in the
//     communicator, MPI_IN_PLACE only where allowed, no null handle):
//     otherwise the MPI library reports the mistake in its own words.
// Every input to that decision is one MPI requires to be the same on every
// process of the call (count, datatype, operator, root; byte counts for the
// collectives that allow different datatypes), and the configuration is
// checked to be the same on every process at MPI_Init, so all processes of a
// call decide alike.
//
// One copse Team per communicator, created at its first served call (all
// processes reach it together) and cached in a communicator attribute whose
// keyval has MPI_COMM_NULL_COPY_FN (MPI_Comm_dup does not inherit it) and a
// delete callback that frees it. MPI_Comm_free destroys the Team before the
// communicator goes, outside the attribute callback; MPI_Finalize destroys
// every Team, writes the stats file, then calls PMPI_Finalize.
//
// Errors in a served call follow the communicator's error handler:
// MPI_ERRORS_ARE_FATAL prints "copse: MPI_Allreduce failed on rank r of its
// communicator: MESSAGE" on one line and calls MPI_Abort; otherwise the
// handler is called with an MPI error class, which the call returns:
//   usage                            MPI_ERR_ARG
//   schedule                         MPI_ERR_TRUNCATE (processes called with
//                                    sizes that do not match: what MPI
//                                    reports when a message is longer than
//                                    its receive buffer)
//   timeout, aborted, failed, system MPI_ERR_OTHER (no MPI class says more)
//   out of memory                    MPI_ERR_NO_MEM
//
// Configuration errors: at MPI_Init every process loads the configuration
// (COPSE_* variables, copse.toml); if one cannot, the lowest such rank prints
// its one-line error and the job is aborted (MPI_Abort, error code 2), as the
// CLI exits 2: the application has not started its work yet, and running on
// the MPI library's collectives instead would pass off an MPI run as a copse
// run. Likewise if the processes' settings differ (mpi.stats excepted).

#include <mpi.h>

#include <functional>

#include "config/config.hpp"
#include "mpi/mapping.hpp"
#include "runtime/mpi_comm.hpp"

namespace copse::mpi::interposer {

// Set-up and teardown hooks.
int init(int* argc, char*** argv);
int init_thread(int* argc, char*** argv, int required, int* provided);
int finalize();
int comm_free(MPI_Comm* comm);
int op_free(MPI_Op* op);

// The ten collectives, with MPI's C signatures and semantics (bcast,
// allgather, scatter, gather and alltoall: mpi/interposer_moving.cpp).
int allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm);
int bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm);
int barrier(MPI_Comm comm);
int allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
              MPI_Datatype recv_type, MPI_Comm comm);
int reduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int reduce_scatter(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
int scatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
            MPI_Datatype recv_type, int root, MPI_Comm comm);
int gather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count, MPI_Datatype recv_type,
           int root, MPI_Comm comm);
int alltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
             MPI_Datatype recv_type, MPI_Comm comm);
// The v-variants (mpi/interposer_vector.cpp says when they are served).
int allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
               const int* displs, MPI_Datatype recv_type, MPI_Comm comm);
int gatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
            const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm);
int scatterv(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
             int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm);
int alltoallv(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
              const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm);

// Fortran's MPI_IN_PLACE and MPI_BOTTOM are addresses of its own (common
// blocks), not C's: the C constant for either, any other address unchanged.
void* from_fortran(void* buffer);
// Finds those addresses (bindings_fortran.cpp); at MPI_Init.
void find_fortran_constants();

// While one lives on a thread, that thread's MPI calls are copse's own: every
// intercepted call goes straight to the MPI library, uncounted.
class Nested {
 public:
  Nested();
  ~Nested();
  Nested(const Nested&) = delete;
  Nested& operator=(const Nested&) = delete;
};

// For the C API, between MPI_Init and MPI_Finalize (null otherwise): the
// datatype and operator mapping, and the Team options from the configuration.
Mapping* mapping();
const CommOptions* comm_options();
// `teardown` runs at MPI_Finalize, before PMPI_Finalize, unless forgotten
// first; a C API team registers the destruction of its Team.
int at_finalize(std::function<void()> teardown);
void forget_at_finalize(int id);

// Nonblocking and persistent collectives (mpi/interposer_nonblocking.cpp):
// served on a communicator whose Team exists (MPI_COMM_WORLD's is made at
// MPI_Init; another's at its first served blocking call -- a nonblocking
// start must never wait for other processes, and making a Team does), by
// the same rules as the blocking call, contiguous datatypes only; the rest
// go to the MPI library's PMPI_I* (PMPIX_*_init). The request is copse's
// own handle, which the request calls below tell from the library's.
void make_world_team();  // at MPI_Init
int iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
               MPI_Request* request);
int ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
            MPI_Request* request);
int ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request);
int ibarrier(MPI_Comm comm, MPI_Request* request);
int iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
               MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request);
int ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          MPI_Request* request);
int ireduce_scatter(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request);
int reduce_scatter_init(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request);
int iscatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
             MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request);
int igather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
            MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request);
int ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
              MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request);
int allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                   MPI_Request* request);
int reduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Info info, MPI_Request* request);
int reduce_scatter_block_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                              MPI_Info info, MPI_Request* request);
int barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request);
int bcast_init(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
               MPI_Request* request);
int allgather_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                   MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int scatter_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                 MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int gather_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int alltoall_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request);
// The v-variants' (mpi/interposer_vector.cpp says how they decide without
// waiting at their start).
int iallgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                const int* displs, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request);
int allgatherv_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                    const int* displs, MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int igatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
             const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request);
int gatherv_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                 const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info,
                 MPI_Request* request);
int iscatterv(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
              int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request);
int scatterv_init(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request);
int ialltoallv(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
               const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm,
               MPI_Request* request);
int alltoallv_init(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
                   const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info,
                   MPI_Request* request);
// The request calls: copse's requests progressed a step at a time, the
// library's passed through, both in one call where MPI takes several.
int test(MPI_Request* request, int* flag, MPI_Status* status);
int wait(MPI_Request* request, MPI_Status* status);
int testall(int count, MPI_Request* requests, int* flag, MPI_Status* statuses);
int waitall(int count, MPI_Request* requests, MPI_Status* statuses);
int waitany(int count, MPI_Request* requests, int* index, MPI_Status* status);
int testany(int count, MPI_Request* requests, int* index, int* flag, MPI_Status* status);
int waitsome(int count, MPI_Request* requests, int* outcount, int* indices, MPI_Status* statuses);
int testsome(int count, MPI_Request* requests, int* outcount, int* indices, MPI_Status* statuses);
int request_get_status(MPI_Request request, int* flag, MPI_Status* status);
int cancel(MPI_Request* request);
int request_free(MPI_Request* request);
int start(MPI_Request* request);
int startall(int count, MPI_Request* requests);
// Whether `handle` is a live copse request (the Fortran spellings give those
// handles of their own, bindings_fortran_requests.cpp).
bool is_copse_request(MPI_Request handle);

}  // namespace copse::mpi::interposer
