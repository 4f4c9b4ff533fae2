// The MPI functions libcopse_mpi.so defines for C and C++ programs. Open MPI's
// libmpi.so defines each MPI_ name as a weak alias of its PMPI_ function, so
// a library loaded first (LD_PRELOAD) or linked before libmpi that defines the
// MPI_ name is the one a program calls; copse then reaches the MPI library
// through the PMPI_ names (mpi/interposer.cpp).

#include <mpi.h>

#include "mpi/interposer.hpp"

namespace ip = copse::mpi::interposer;

extern "C" {

int MPI_Init(int* argc, char*** argv) { return ip::init(argc, argv); }

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return ip::init_thread(argc, argv, required, provided);
}

int MPI_Finalize() { return ip::finalize(); }

int MPI_Comm_free(MPI_Comm* comm) { return ip::comm_free(comm); }

int MPI_Op_free(MPI_Op* op) { return ip::op_free(op); }

int MPI_Allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return ip::allreduce(send, recv, count, type, op, comm);
}

int MPI_Reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  return ip::reduce(send, recv, count, type, op, root, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return ip::bcast(buffer, count, type, root, comm);
}

int MPI_Barrier(MPI_Comm comm) { return ip::barrier(comm); }

int MPI_Allgather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                  MPI_Datatype recv_type, MPI_Comm comm) {
  return ip::allgather(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

int MPI_Reduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return ip::reduce_scatter_block(send, recv, count, type, op, comm);
}

int MPI_Reduce_scatter(const void* send, void* recv, const int counts[], MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return ip::reduce_scatter(send, recv, counts, type, op, comm);
}

int MPI_Scatter(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                MPI_Datatype recv_type, int root, MPI_Comm comm) {
  return ip::scatter(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
}

int MPI_Gather(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
               MPI_Datatype recv_type, int root, MPI_Comm comm) {
  return ip::gather(send, send_count, send_type, recv, recv_count, recv_type, root, comm);
}

int MPI_Alltoall(const void* send, int send_count, MPI_Datatype send_type, void* recv, int recv_count,
                 MPI_Datatype recv_type, MPI_Comm comm) {
  return ip::alltoall(send, send_count, send_type, recv, recv_count, recv_type, comm);
}

int MPI_Allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                   const int displs[], MPI_Datatype recv_type, MPI_Comm comm) {
  return ip::allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm);
}

int MPI_Gatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int recv_counts[],
                const int displs[], MPI_Datatype recv_type, int root, MPI_Comm comm) {
  return ip::gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm);
}

int MPI_Scatterv(const void* send, const int send_counts[], const int displs[], MPI_Datatype send_type, void* recv,
                 int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm) {
  return ip::scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm);
}

int MPI_Alltoallv(const void* send, const int send_counts[], const int send_displs[], MPI_Datatype send_type,
                  void* recv, const int recv_counts[], const int recv_displs[], MPI_Datatype recv_type, MPI_Comm comm) {
  return ip::alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm);
}

}  // extern "C"
