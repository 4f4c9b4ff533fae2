#pragma once
// What the Fortran spellings of libcopse_mpi.so share: the blocking
// collectives' (bindings_fortran.cpp) and the nonblocking, persistent and
// request calls' (bindings_fortran_requests.cpp). Private to the library;
// bindings_fortran.cpp's header comment says how Open MPI's Fortran calls
// arrive and why every argument is a pointer.

#include <mpi.h>

// Counts, displacements and handles go through as they are.
static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER and C int differ");

// Defines every spelling under which a Fortran program's call reaches the
// library (mpif.h and `use mpi`: lower, lower_, lower__, UPPER; `use
// mpi_f08`: lower_f08_), each an alias of copse_fortran_<lower>.
#define COPSE_FORTRAN_SPELLINGS(lower, upper, params)                               \
  extern "C" void lower params __attribute__((alias("copse_fortran_" #lower)));     \
  extern "C" void lower##_ params __attribute__((alias("copse_fortran_" #lower)));  \
  extern "C" void lower##__ params __attribute__((alias("copse_fortran_" #lower))); \
  extern "C" void upper params __attribute__((alias("copse_fortran_" #lower)));     \
  extern "C" void lower##_f08_ params __attribute__((alias("copse_fortran_" #lower)));

namespace copse::mpi::interposer {

// IERROR, when the caller passed one (an f08 caller may leave it out: null).
inline void set(MPI_Fint* ierror, int rc) {
  if (ierror) *ierror = static_cast<MPI_Fint>(rc);
}

// Whether `status` is Fortran's MPI_STATUS_IGNORE, `statuses` its
// MPI_STATUSES_IGNORE: addresses of common blocks, as MPI_IN_PLACE's
// (find_fortran_constants finds all of them at MPI_Init).
bool is_fortran_status_ignore(const MPI_Fint* status);
bool is_fortran_statuses_ignore(const MPI_Fint* statuses);

// The Fortran handle of a C request a call returned (copse's get handles of
// their own: bindings_fortran_requests.cpp).
MPI_Fint to_fortran(MPI_Request request);

// A start call: `start(&request)` is C's, whose request becomes Fortran's `handle`.
template <class Start>
void new_request(MPI_Fint* handle, MPI_Fint* ierror, Start&& start) {
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = start(&request);
  if (rc == MPI_SUCCESS) *handle = to_fortran(request);
  set(ierror, rc);
}

}  // namespace copse::mpi::interposer
