#pragma once
// copse's requests as MPI_Request handles: the nonblocking and persistent
// calls served (mpi/interposer_nonblocking.cpp) and the request calls that
// progress them (mpi/interposer_requests.cpp). Private to libcopse_mpi.so.
//
// A handle is the address of a CopseRequest, kept in a list of the live
// ones: what tells it from the library's (whose handles are addresses of the
// library's own objects, never ours). While no copse request lives, the
// request calls cost the library's one atomic load more.

#include <mpi.h>

#include <mutex>

#include "mpi/interposer_state.hpp"
#include "runtime/request.hpp"

namespace copse::mpi::interposer {

struct CopseRequest {
  Record* record = nullptr;  // the communicator's (errors go to its handler)
  Request request;
  const char* call = "";  // "MPI_Iallreduce", for messages
  bool persistent = false;
  bool active = false;  // persistent: started and not yet completed by a test or wait
};

// Held while a thread progresses (or starts) copse's calls: a rank's queue
// is one thread's at a time.
std::unique_lock<std::recursive_mutex> progress_lock();

// Registers `r` (now owned by the list) and returns its handle.
MPI_Request register_request(CopseRequest* r);
// The request behind `handle` if it is copse's, else null.
CopseRequest* ours(MPI_Request handle);

}  // namespace copse::mpi::interposer
