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

#include <atomic>
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

}  // namespace copse::mpi::interposer
