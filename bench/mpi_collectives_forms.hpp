#pragma once
// The three forms bench/mpi_collectives.cpp times a collective in (--forms):
// the blocking call; the nonblocking one, MPI_I<collective> then MPI_Wait;
// the persistent one, made once per collective, root and size, then
// MPI_Start and MPI_Wait per call (bench/mpi_collectives_forms.cpp); and how
// the ranks line up before each timed call (--sync).
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

// Before each timed call: MPI_Barrier, as mpicroscope does, or (p2p) a
// dissemination barrier of empty MPI_Sendrecv messages, ceil(log2 p) rounds,
// which no collective library replaces. A library's own barrier lets the
// ranks go in an order that suits some next calls and hurts others (copse's
// across three hosts: a bcast from rank 0 after it 43 against 20 us with Open
// MPI's, a reduce 38 against 47 us; both sides even after the p2p line-up),
// so the call timed after it carries part of the barrier's cost or gain;
// with p2p both sides start every call from the same line-up.
enum class Sync { barrier, p2p };
const char* sync_name(Sync sync);                      // "barrier", "p2p"
bool sync_named(const std::string& name, Sync& sync);  // false: no such line-up
void line_up(Sync sync, int rank, int ranks);

}  // namespace mpi_collectives
