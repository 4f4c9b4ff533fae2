// The Fortran spellings of the MPI functions libcopse_mpi.so serves.
//
// Open MPI's Fortran bindings call the PMPI_ functions directly (ompi issue
// 3954): mpif.h and `use mpi` reach libmpi_mpifh.so's mpi_allreduce_ (also
// spelt mpi_allreduce__, mpi_allreduce and MPI_ALLREDUCE, one function), and
// `use mpi_f08` reaches libmpi_usempif08.so's mpi_allreduce_f08_, neither
// through C's MPI_Allreduce. So a C-only interposer never sees a Fortran
// program's collectives, nor its MPI_Init and MPI_Finalize. Here every such
// spelling is defined (an alias of one function), doing what Open MPI's own
// binding does -- handles converted with PMPI_Comm_f2c, PMPI_Type_f2c,
// PMPI_Op_f2c; Fortran's MPI_IN_PLACE and MPI_BOTTOM made C's -- before the
// same path as C's call.
//
// Every argument is passed by reference. f08's TYPE(MPI_Comm), TYPE(MPI_Op),
// TYPE(MPI_Datatype) hold one INTEGER (MPI_VAL), so a pointer to one is a
// pointer to an MPI_Fint; Open MPI 4.1's f08 buffers are passed by address
// (ignore-TKR), as in mpif.h; and an f08 caller that leaves out the optional
// IERROR passes a null pointer, so it is only written when present.

#include "mpi/bindings_fortran.hpp"

#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <string>

#include "mpi/interposer.hpp"

namespace copse::mpi::interposer {

// Fortran's MPI_IN_PLACE and MPI_BOTTOM: Open MPI's mpif.h, `use mpi` and
// `use mpi_f08` all pass the address of a common block (gfortran names it
// mpi_fortran_in_place_; Open MPI's own check, OMPI_IS_FORTRAN_IN_PLACE,
// accepts four spellings, and so do we). libmpi.so defines the blocks, and a
// Fortran program's own definition takes precedence in the dynamic linker's
// search order, so dlsym(RTLD_DEFAULT) at MPI_Init finds the address every
// Fortran caller passes -- the one a profiling tool would learn by calling a
// Fortran routine with MPI_IN_PLACE, without building one.
namespace {
// Each written once, at MPI_Init: a spelling the program does not define is null.
std::array<void*, 4> g_fortran_in_place{};
std::array<void*, 4> g_fortran_bottom{};
// MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE likewise (OMPI_IS_FORTRAN_STATUS_IGNORE).
std::array<void*, 4> g_fortran_status_ignore{};
std::array<void*, 4> g_fortran_statuses_ignore{};

// The four spellings of common block `lower`: lower, lower_, lower__, UPPER.
void find_common_block(std::array<void*, 4>& at, const char* lower, const char* upper) {
  const std::string name = lower;
  at = {dlsym(RTLD_DEFAULT, name.c_str()), dlsym(RTLD_DEFAULT, (name + "_").c_str()),
        dlsym(RTLD_DEFAULT, (name + "__").c_str()), dlsym(RTLD_DEFAULT, upper)};
}

bool is_one_of(const std::array<void*, 4>& at, const void* p) {
  return p && std::find(at.begin(), at.end(), p) != at.end();
}
}  // namespace

void find_fortran_constants() {
  find_common_block(g_fortran_in_place, "mpi_fortran_in_place", "MPI_FORTRAN_IN_PLACE");
  find_common_block(g_fortran_bottom, "mpi_fortran_bottom", "MPI_FORTRAN_BOTTOM");
  find_common_block(g_fortran_status_ignore, "mpi_fortran_status_ignore", "MPI_FORTRAN_STATUS_IGNORE");
  find_common_block(g_fortran_statuses_ignore, "mpi_fortran_statuses_ignore", "MPI_FORTRAN_STATUSES_IGNORE");
}

void* from_fortran(void* buffer) {
  if (is_one_of(g_fortran_in_place, buffer)) return MPI_IN_PLACE;
  if (is_one_of(g_fortran_bottom, buffer)) return MPI_BOTTOM;
  return buffer;
}

bool is_fortran_status_ignore(const MPI_Fint* status) { return is_one_of(g_fortran_status_ignore, status); }
bool is_fortran_statuses_ignore(const MPI_Fint* statuses) { return is_one_of(g_fortran_statuses_ignore, statuses); }

}  // namespace copse::mpi::interposer

namespace ip = copse::mpi::interposer;

using ip::set;

extern "C" {

__attribute__((visibility("hidden"))) void copse_fortran_mpi_init(MPI_Fint* ierror) {
  set(ierror, ip::init(nullptr, nullptr));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_init_thread(MPI_Fint* required, MPI_Fint* provided,
                                                                         MPI_Fint* ierror) {
  int level = 0;
  const int rc = ip::init_thread(nullptr, nullptr, *required, &level);
  *provided = static_cast<MPI_Fint>(level);
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_finalize(MPI_Fint* ierror) { set(ierror, ip::finalize()); }

__attribute__((visibility("hidden"))) void copse_fortran_mpi_comm_free(MPI_Fint* comm, MPI_Fint* ierror) {
  MPI_Comm c = PMPI_Comm_f2c(*comm);
  const int rc = ip::comm_free(&c);
  if (rc == MPI_SUCCESS) *comm = PMPI_Comm_c2f(c);
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_op_free(MPI_Fint* op, MPI_Fint* ierror) {
  MPI_Op o = PMPI_Op_f2c(*op);
  const int rc = ip::op_free(&o);
  if (rc == MPI_SUCCESS) *op = PMPI_Op_c2f(o);
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_allreduce(void* send, void* recv, MPI_Fint* count,
                                                                       MPI_Fint* type, MPI_Fint* op, MPI_Fint* comm,
                                                                       MPI_Fint* ierror) {
  set(ierror, ip::allreduce(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                            PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_reduce(void* send, void* recv, MPI_Fint* count,
                                                                    MPI_Fint* type, MPI_Fint* op, MPI_Fint* root,
                                                                    MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::reduce(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type), PMPI_Op_f2c(*op),
                         *root, PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_bcast(void* buffer, MPI_Fint* count, MPI_Fint* type,
                                                                   MPI_Fint* root, MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::bcast(ip::from_fortran(buffer), *count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_barrier(MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::barrier(PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_allgather(void* send, MPI_Fint* send_count,
                                                                       MPI_Fint* send_type, void* recv,
                                                                       MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                       MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::allgather(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                            *recv_count, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_reduce_scatter_block(void* send, void* recv,
                                                                                  MPI_Fint* count, MPI_Fint* type,
                                                                                  MPI_Fint* op, MPI_Fint* comm,
                                                                                  MPI_Fint* ierror) {
  set(ierror, ip::reduce_scatter_block(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                                       PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_reduce_scatter(void* send, void* recv, MPI_Fint* counts,
                                                                            MPI_Fint* type, MPI_Fint* op,
                                                                            MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::reduce_scatter(ip::from_fortran(send), ip::from_fortran(recv), counts, PMPI_Type_f2c(*type),
                                 PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_scatter(void* send, MPI_Fint* send_count,
                                                                     MPI_Fint* send_type, void* recv,
                                                                     MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                     MPI_Fint* root, MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::scatter(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                          *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_gather(void* send, MPI_Fint* send_count,
                                                                    MPI_Fint* send_type, void* recv,
                                                                    MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                    MPI_Fint* root, MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::gather(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                         *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_alltoall(void* send, MPI_Fint* send_count,
                                                                      MPI_Fint* send_type, void* recv,
                                                                      MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                      MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::alltoall(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                           *recv_count, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm)));
}

// The v-variants: counts and displacements go through as they are (MPI_Fint is int).
__attribute__((visibility("hidden"))) void copse_fortran_mpi_allgatherv(void* send, MPI_Fint* send_count,
                                                                        MPI_Fint* send_type, void* recv,
                                                                        MPI_Fint* recv_counts, MPI_Fint* displs,
                                                                        MPI_Fint* recv_type, MPI_Fint* comm,
                                                                        MPI_Fint* ierror) {
  set(ierror, ip::allgatherv(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                             recv_counts, displs, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_gatherv(void* send, MPI_Fint* send_count,
                                                                     MPI_Fint* send_type, void* recv,
                                                                     MPI_Fint* recv_counts, MPI_Fint* displs,
                                                                     MPI_Fint* recv_type, MPI_Fint* root,
                                                                     MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror, ip::gatherv(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                          recv_counts, displs, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_scatterv(void* send, MPI_Fint* send_counts,
                                                                      MPI_Fint* displs, MPI_Fint* send_type, void* recv,
                                                                      MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                      MPI_Fint* root, MPI_Fint* comm,
                                                                      MPI_Fint* ierror) {
  set(ierror,
      ip::scatterv(ip::from_fortran(send), send_counts, displs, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                   *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm)));
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_alltoallv(void* send, MPI_Fint* send_counts,
                                                                       MPI_Fint* send_displs, MPI_Fint* send_type,
                                                                       void* recv, MPI_Fint* recv_counts,
                                                                       MPI_Fint* recv_displs, MPI_Fint* recv_type,
                                                                       MPI_Fint* comm, MPI_Fint* ierror) {
  set(ierror,
      ip::alltoallv(ip::from_fortran(send), send_counts, send_displs, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                    recv_counts, recv_displs, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm)));
}

}  // extern "C"

COPSE_FORTRAN_SPELLINGS(mpi_init, MPI_INIT, (MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_init_thread, MPI_INIT_THREAD, (MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_finalize, MPI_FINALIZE, (MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_comm_free, MPI_COMM_FREE, (MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_op_free, MPI_OP_FREE, (MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_allreduce, MPI_ALLREDUCE,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_reduce, MPI_REDUCE,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_bcast, MPI_BCAST, (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_barrier, MPI_BARRIER, (MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_allgather, MPI_ALLGATHER,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_reduce_scatter, MPI_REDUCE_SCATTER,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_scatter, MPI_SCATTER,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_gather, MPI_GATHER,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_alltoall, MPI_ALLTOALL,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_allgatherv, MPI_ALLGATHERV,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_gatherv, MPI_GATHERV,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_scatterv, MPI_SCATTERV,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_alltoallv, MPI_ALLTOALLV,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
