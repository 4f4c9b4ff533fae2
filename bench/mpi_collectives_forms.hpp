#pragma once
// The three forms bench/mpi_collectives.cpp times a collective in (--forms):
// the blocking call; the nonblocking one, MPI_I<collective> then MPI_Wait;
// the persistent one, made once per collective, root and size, then
// MPI_Start and MPI_Wait per call (bench/mpi_collectives_forms.cpp); each
// through either of MPI's two names of it (Entry); and how the ranks line up
// before each timed call (--sync).
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

// Which of the two names MPI gives every function a call goes through. MPI_
// is what a program calls, bound by the dynamic linker to whatever defines
// it first -- copse's interposer under LD_PRELOAD; PMPI_ is always the MPI
// library's own (the profiling interface, which copse does not define).
// Timing both in one process (--native) sets copse and the library side by
// side under the same launch: same placement, same pages, same neighbours.
enum class Entry { mpi, pmpi };

int call_blocking(Entry e, const CallBuffers& b);
int start_nonblocking(Entry e, const CallBuffers& b, MPI_Request* request);
// Whether this MPI has the persistent collectives (MPI 4, or Open MPI's MPIX_*_init).
bool has_persistent();
int init_persistent(Entry e, const CallBuffers& b, MPI_Request* request);
int start(Entry e, MPI_Request* request);
int wait(Entry e, MPI_Request* request);
int request_free(Entry e, MPI_Request* request);

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
