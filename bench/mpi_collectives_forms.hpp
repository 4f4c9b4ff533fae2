#pragma once
// The three forms bench/mpi_collectives.cpp times a collective in (--forms):
// the blocking call; the nonblocking one, MPI_I<collective> then MPI_Wait;
// the persistent one, made once per collective, root and size, then
// MPI_Start and MPI_Wait per call (bench/mpi_collectives_forms.cpp).
#include <mpi.h>

#include <string>

#include "mpi_collectives.hpp"

namespace mpi_collectives {

enum class Form { blocking, nonblocking, persistent };
const char* form_name(Form form);                      // "blocking", "nonblocking", "persistent"
bool form_named(const std::string& name, Form& form);  // false: no such form

// One call's arguments, on MPI_COMM_WORLD, float32 and (where it reduces) sum.
struct CallBuffers {
  Id id;
  int root, count;
  float *send, *recv;
  const int* recv_counts;  // MPI_Reduce_scatter's, every one `count`
};

int start_nonblocking(const CallBuffers& b, MPI_Request* request);
// Whether this MPI has the persistent collectives (MPI 4, or Open MPI's MPIX_*_init).
bool has_persistent();
int init_persistent(const CallBuffers& b, MPI_Request* request);

}  // namespace mpi_collectives
