// The Fortran spellings of the nonblocking and persistent v-variants
// (MPI_Iallgatherv, MPI_Igatherv, MPI_Iscatterv, MPI_Ialltoallv and Open
// MPI's MPIX_*v_init), beside bindings_fortran_requests.cpp's other
// nonblocking calls, whose header comment says how request handles cross:
// counts and displacements go through as they are (MPI_Fint is int).

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_*_init
#endif

#include "mpi/bindings_fortran.hpp"
#include "mpi/interposer.hpp"

namespace ip = copse::mpi::interposer;

extern "C" {

__attribute__((visibility("hidden"))) void copse_fortran_mpi_iallgatherv(void* send, MPI_Fint* send_count,
                                                                         MPI_Fint* send_type, void* recv,
                                                                         MPI_Fint* recv_counts, MPI_Fint* displs,
                                                                         MPI_Fint* recv_type, MPI_Fint* comm,
                                                                         MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::iallgatherv(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                           recv_counts, displs, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_igatherv(
    void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv, MPI_Fint* recv_counts, MPI_Fint* displs,
    MPI_Fint* recv_type, MPI_Fint* root, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::igatherv(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                        recv_counts, displs, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_iscatterv(
    void* send, MPI_Fint* send_counts, MPI_Fint* displs, MPI_Fint* send_type, void* recv, MPI_Fint* recv_count,
    MPI_Fint* recv_type, MPI_Fint* root, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::iscatterv(ip::from_fortran(send), send_counts, displs, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                         *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ialltoallv(
    void* send, MPI_Fint* send_counts, MPI_Fint* send_displs, MPI_Fint* send_type, void* recv, MPI_Fint* recv_counts,
    MPI_Fint* recv_displs, MPI_Fint* recv_type, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::ialltoallv(ip::from_fortran(send), send_counts, send_displs, PMPI_Type_f2c(*send_type),
                          ip::from_fortran(recv), recv_counts, recv_displs, PMPI_Type_f2c(*recv_type),
                          PMPI_Comm_f2c(*comm), c);
  });
}

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
__attribute__((visibility("hidden"))) void copse_fortran_mpix_allgatherv_init(
    void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv, MPI_Fint* recv_counts, MPI_Fint* displs,
    MPI_Fint* recv_type, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::allgatherv_init(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                               recv_counts, displs, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm),
                               PMPI_Info_f2c(*info), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpix_gatherv_init(
    void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv, MPI_Fint* recv_counts, MPI_Fint* displs,
    MPI_Fint* recv_type, MPI_Fint* root, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::gatherv_init(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                            recv_counts, displs, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm),
                            PMPI_Info_f2c(*info), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpix_scatterv_init(
    void* send, MPI_Fint* send_counts, MPI_Fint* displs, MPI_Fint* send_type, void* recv, MPI_Fint* recv_count,
    MPI_Fint* recv_type, MPI_Fint* root, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::scatterv_init(ip::from_fortran(send), send_counts, displs, PMPI_Type_f2c(*send_type),
                             ip::from_fortran(recv), *recv_count, PMPI_Type_f2c(*recv_type), *root,
                             PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpix_alltoallv_init(
    void* send, MPI_Fint* send_counts, MPI_Fint* send_displs, MPI_Fint* send_type, void* recv, MPI_Fint* recv_counts,
    MPI_Fint* recv_displs, MPI_Fint* recv_type, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::alltoallv_init(ip::from_fortran(send), send_counts, send_displs, PMPI_Type_f2c(*send_type),
                              ip::from_fortran(recv), recv_counts, recv_displs, PMPI_Type_f2c(*recv_type),
                              PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}
#endif

}  // extern "C"

COPSE_FORTRAN_SPELLINGS(mpi_iallgatherv, MPI_IALLGATHERV,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_igatherv, MPI_IGATHERV,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_iscatterv, MPI_ISCATTERV,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ialltoallv, MPI_IALLTOALLV,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*))
#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
COPSE_FORTRAN_SPELLINGS(mpix_allgatherv_init, MPIX_ALLGATHERV_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_gatherv_init, MPIX_GATHERV_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_scatterv_init, MPIX_SCATTERV_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_alltoallv_init, MPIX_ALLTOALLV_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*, MPI_Fint*))
#endif
