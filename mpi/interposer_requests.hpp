#pragma once
// copse's requests as MPI_Request handles: the nonblocking and persistent
// calls served (mpi/interposer_nonblocking.cpp) and the request calls that
// progress them (mpi/interposer_requests.cpp). Private to libcopse_mpi.so.
//
// A handle is the address of a CopseRequest in the slots that
// mpi/interposer_requests.cpp keeps for the process's life: what tells it
// from the library's (whose handles are addresses of the library's own
// objects, never in our slots) is an address comparison, without a lock or
// a list. While no copse request lives, the request calls cost the library's
// one atomic load more.

#include <mpi.h>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_*_init
#endif

#include <atomic>
#include <mutex>
#include <new>
#include <utility>

#include "mpi/interposer_state.hpp"
#include "runtime/request.hpp"

namespace copse::mpi::interposer {

struct CopseRequest {
  Record* record = nullptr;  // the communicator's (errors go to its handler)
  Request request;
  const char* call = "";  // "MPI_Iallreduce", for messages
  bool persistent = false;
  bool active = false;  // persistent: started and not yet completed by a test or wait
  // MPI_Request_free'd while its call may still run: progressed with the
  // others until it is done, then its slot is free again.
  bool freed = false;
  std::atomic<bool> live{false};      // the application holds its handle
  CopseRequest* next_free = nullptr;  // in the slots' free list
};

// Held while a thread progresses (or starts) copse's calls: a rank's queue
// is one thread's at a time. Taken only when the library gave
// MPI_THREAD_MULTIPLE: below it the application calls MPI from one thread
// at a time (MPI's rule; copse starts no thread of its own that calls
// MPI), so no other thread can be in a queue, and the lock would only cost
// its two atomic operations per call.
class ProgressLock {
 public:
  ProgressLock() : held_(locking()) {
    if (held_) lock();
  }
  explicit ProgressLock(std::try_to_lock_t) : held_(locking()) {
    if (held_) owns_ = held_ = try_lock();
  }
  ~ProgressLock() {
    if (held_) unlock();
  }
  ProgressLock(const ProgressLock&) = delete;
  ProgressLock& operator=(const ProgressLock&) = delete;
  explicit operator bool() const { return owns_; }

  // Whether the library gave MPI_THREAD_MULTIPLE: asked at each request's
  // making (new_request), until then assumed.
  static std::atomic<bool> multiple;

 private:
  static bool locking() { return multiple.load(std::memory_order_relaxed); }
  static void lock();
  static bool try_lock();
  static void unlock();

  bool held_ = false;  // the mutex is locked here
  bool owns_ = true;   // the caller may progress
};

// A free slot for a request (fields reset; throws std::bad_alloc when none
// can be made); register_request then hands it out, or give_back returns it.
CopseRequest* new_request();
void give_back(CopseRequest* r);
// Registers `r`, whose fields are set, and returns its handle.
MPI_Request register_request(CopseRequest* r);
// The request behind `handle` if it is copse's, else null.
CopseRequest* ours(MPI_Request handle);

// ---- starting a nonblocking or persistent call (interposer_nonblocking.cpp,
// interposer_vector.cpp) ----

// The communicator's record when it has a Team already: looked up, never
// made (making one waits for every process).
Record* with_team(State& s, MPI_Comm comm);

// How a call starts: nonblocking (MPI_I*), or persistent (MPIX_*_init, with
// its info, whose hints copse does not read).
struct Started {
  bool persistent = false;
  MPI_Info info = MPI_INFO_NULL;
  const char* name(const char* nonblocking, const char* init) const { return persistent ? init : nonblocking; }
  CallForm form() const { return persistent ? CallForm::persistent : CallForm::nonblocking; }
};

// Starts one call on the record's Team: start(comm) returns its Request.
// Counted served by the caller (serve below; a v-variant once its processes
// agreed).
template <class Start>
int start_request(const char* call, Record& r, MPI_Request* out, bool persistent, Start&& start) {
  const ProgressLock progressing;
  Nested nested;
  CopseRequest* request = nullptr;
  try {
    request = new_request();  // before the call starts: a call started has its request
    request->record = &r;
    request->call = call;
    request->persistent = persistent;
    request->request = start(r.take_choice());
    *out = register_request(request);
    return MPI_SUCCESS;
  } catch (...) {
    if (request) give_back(request);
    return fail_current(call, r);
  }
}

template <class Start>
int serve(State& s, MpiCollective c, const char* call, Record& r, MPI_Request* out, bool persistent, Start&& start) {
  s.stats.served(c, persistent);
  return start_request(call, r, out, persistent, std::forward<Start>(start));
}

// The library's own call, where copse does not serve it (`request` in scope).
#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
#define COPSE_LIBRARY_CALL(how, nonblocking, init, ...) \
  ((how).persistent ? PMPIX_##init(__VA_ARGS__, (how).info, request) : PMPI_##nonblocking(__VA_ARGS__, request))
#else
#define COPSE_LIBRARY_CALL(how, nonblocking, init, ...) PMPI_##nonblocking(__VA_ARGS__, request)
#endif

}  // namespace copse::mpi::interposer
