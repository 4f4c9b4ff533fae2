// The nonblocking and persistent collectives and the request calls
// libcopse_mpi.so defines for C and C++ programs (as bindings_c.cpp does the
// blocking ones; mpi/interposer.hpp says what is served).

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_*_init
#endif

#include "mpi/interposer.hpp"

namespace ip = copse::mpi::interposer;

extern "C" {

int MPI_Iallreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return ip::iallreduce(send, recv, count, type, op, comm, request);
}

int MPI_Ireduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request* request) {
  return ip::ireduce(send, recv, count, type, op, root, comm, request);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  return ip::ibcast(buffer, count, type, root, comm, request);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) { return ip::ibarrier(comm, request); }

int MPI_Iallgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                   MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return ip::iallgather(send, send_count, send_type, recv, recv_count, recv_type, comm, request);
}

int MPI_Ireduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request) {
  return ip::ireduce_scatter_block(send, recv, count, type, op, comm, request);
}

int MPI_Ireduce_scatter(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Request* request) {
  return ip::ireduce_scatter(send, recv, counts, type, op, comm, request);
}

int MPI_Iscatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                 MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return ip::iscatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request);
}

int MPI_Igather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return ip::igather(send, send_count, send_type, recv, recv_count, recv_type, root, comm, request);
}

int MPI_Ialltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return ip::ialltoall(send, send_count, send_type, recv, recv_count, recv_type, comm, request);
}

int MPI_Iallgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                    const int displs[], MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return ip::iallgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, request);
}

int MPI_Igatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                 const int displs[], MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return ip::igatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm, request);
}

int MPI_Iscatterv(const void* send, const int send_counts[], const int displs[], MPI_Datatype send_type, void* recv,
                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return ip::iscatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm, request);
}

int MPI_Ialltoallv(const void* send, const int send_counts[], const int send_displs[], MPI_Datatype send_type,
                   void* recv, const int recv_counts[], const int recv_displs[], MPI_Datatype recv_type, MPI_Comm comm,
                   MPI_Request* request) {
  return ip::ialltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm,
                        request);
}

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
int MPIX_Allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  return ip::allreduce_init(send, recv, count, type, op, comm, info, request);
}

int MPIX_Reduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request) {
  return ip::reduce_init(send, recv, count, type, op, root, comm, info, request);
}

int MPIX_Reduce_scatter_block_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                   MPI_Info info, MPI_Request* request) {
  return ip::reduce_scatter_block_init(send, recv, count, type, op, comm, info, request);
}

int MPIX_Reduce_scatter_init(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::reduce_scatter_init(send, recv, counts, type, op, comm, info, request);
}

int MPIX_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::barrier_init(comm, info, request);
}

int MPIX_Bcast_init(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request) {
  return ip::bcast_init(buffer, count, type, root, comm, info, request);
}

int MPIX_Allgather_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                        MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::allgather_init(send, send_count, send_type, recv, recv_count, recv_type, comm, info, request);
}

int MPIX_Scatter_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                      MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::scatter_init(send, send_count, send_type, recv, recv_count, recv_type, root, comm, info, request);
}

int MPIX_Gather_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                     MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::gather_init(send, send_count, send_type, recv, recv_count, recv_type, root, comm, info, request);
}

int MPIX_Alltoall_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                       MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::alltoall_init(send, send_count, send_type, recv, recv_count, recv_type, comm, info, request);
}

int MPIX_Allgatherv_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                         const int displs[], MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info,
                         MPI_Request* request) {
  return ip::allgatherv_init(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, info, request);
}

int MPIX_Gatherv_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                      const int displs[], MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request) {
  return ip::gatherv_init(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm, info, request);
}

int MPIX_Scatterv_init(const void* send, const int send_counts[], const int displs[], MPI_Datatype send_type,
                       void* recv, int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return ip::scatterv_init(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm, info,
                           request);
}

int MPIX_Alltoallv_init(const void* send, const int send_counts[], const int send_displs[], MPI_Datatype send_type,
                        void* recv, const int recv_counts[], const int recv_displs[], MPI_Datatype recv_type,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return ip::alltoallv_init(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm,
                            info, request);
}
#endif

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) { return ip::test(request, flag, status); }

int MPI_Wait(MPI_Request* request, MPI_Status* status) { return ip::wait(request, status); }

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  return ip::testall(count, requests, flag, statuses);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  return ip::waitall(count, requests, statuses);
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  return ip::waitany(count, requests, index, status);
}

int MPI_Request_free(MPI_Request* request) { return ip::request_free(request); }

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  return ip::testany(count, requests, index, flag, status);
}

int MPI_Waitsome(int count, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  return ip::waitsome(count, requests, outcount, indices, statuses);
}

int MPI_Testsome(int count, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  return ip::testsome(count, requests, outcount, indices, statuses);
}

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  return ip::request_get_status(request, flag, status);
}

int MPI_Cancel(MPI_Request* request) { return ip::cancel(request); }

int MPI_Start(MPI_Request* request) { return ip::start(request); }

int MPI_Startall(int count, MPI_Request requests[]) { return ip::startall(count, requests); }

}  // extern "C"
