// The request calls (mpi/interposer.hpp): copse's requests progressed a step
// at a time (runtime/pending.hpp), the library's passed through. A wait
// polls rather than sleeps: while it waits, every running copse request and
// every library request it was given is progressed, and the MPI library
// with them, so that neither side's progress waits on the other's. One
// exception (wait()): MPI_Wait for the only copse call running, in a
// process that calls MPI from one thread at a time, waits as the blocking
// collective does -- a persistent 8-byte allreduce's MPI_Start + MPI_Wait
// then costs what its MPI_Allreduce does.

#include "mpi/interposer_requests.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "mpi/few.hpp"

namespace copse::mpi::interposer {

namespace {

std::mutex g_requests_mutex;
std::vector<CopseRequest*> g_requests;  // every registered copse request (freed ones until done)
std::atomic<std::size_t> g_live{0};     // its size, read without the lock
// The copse requests whose calls may be running: the nonblocking ones until
// completed, the persistent ones from MPI_Start until completed, and the
// freed ones until done. Written under the progress lock.
std::atomic<std::size_t> g_running{0};
// Held while a thread progresses copse's calls under MPI_THREAD_MULTIPLE
// (ProgressLock). Recursive: progress_all tests requests under it.
std::recursive_mutex g_progress_mutex;

void add_running(std::size_t n, bool up) {
  // Under the progress lock when it is taken, else from the one thread in
  // MPI: a load and a store, without the read-modify-write's lock prefix.
  const std::size_t now = g_running.load(std::memory_order_relaxed);
  g_running.store(up ? now + n : now - n, std::memory_order_relaxed);
}

// A request whose call may be running (running() true) counts in g_running.
bool running(const CopseRequest& r) { return !r.persistent || r.active; }

// Every copse request has a slot here, in chunks kept for the process's
// life and never moved (chunk k holds kFirst << k slots): a handle is a
// slot's address, told from the library's by comparing addresses, and one
// the application still holds after its request was freed is never a
// dangling pointer of ours.
class Slots {
 public:
  // Under g_requests_mutex.
  CopseRequest* take() {
    if (!free_) grow();
    CopseRequest* r = free_;
    free_ = r->next_free;
    r->next_free = nullptr;
    return r;
  }
  void give_back(CopseRequest* r) {
    r->live.store(false, std::memory_order_release);
    r->record = nullptr;
    r->request = Request();  // a call of its own, done, goes
    r->call = "";
    r->persistent = r->active = r->freed = false;
    r->next_free = free_;
    free_ = r;
  }
  // Without a lock: `handle` is a live slot's address.
  CopseRequest* find(MPI_Request handle) const {
    const auto at = reinterpret_cast<std::uintptr_t>(handle);
    const int chunks = chunks_.load(std::memory_order_acquire);
    for (int k = 0; k < chunks; ++k) {
      // Unsigned: an address below the chunk wraps to a large offset.
      const std::uintptr_t offset = at - reinterpret_cast<std::uintptr_t>(chunk_[k]);
      if (offset >= (kFirst << k) * sizeof(CopseRequest)) continue;
      if (offset % sizeof(CopseRequest) != 0) return nullptr;
      CopseRequest* r = chunk_[k] + offset / sizeof(CopseRequest);
      return r->live.load(std::memory_order_acquire) ? r : nullptr;
    }
    return nullptr;
  }

 private:
  static constexpr int kChunks = 24;
  static constexpr std::size_t kFirst = 64;
  void grow() {
    const int k = chunks_.load(std::memory_order_relaxed);
    if (k == kChunks) throw std::bad_alloc();
    const std::size_t n = kFirst << k;
    chunk_[k] = new CopseRequest[n];
    for (std::size_t i = n; i-- > 0;) {
      chunk_[k][i].next_free = free_;
      free_ = &chunk_[k][i];
    }
    chunks_.store(k + 1, std::memory_order_release);  // chunk_[k] is read only after this
  }

  CopseRequest* chunk_[kChunks] = {};
  std::atomic<int> chunks_{0};
  CopseRequest* free_ = nullptr;
};

Slots g_slots;

// Unregisters `r` and frees its slot.
void forget(CopseRequest* r) {
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  std::erase(g_requests, r);
  g_live.store(g_requests.size(), std::memory_order_release);
  g_slots.give_back(r);
}

// A collective's status: empty.
void empty_status(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
}

// Progresses copse request `r` without waiting; `done` once its call is
// (a persistent request not started is). Returns the call's MPI error.
int test_ours(CopseRequest* r, bool& done) {
  if (!running(*r)) {
    done = true;
    return MPI_SUCCESS;
  }
  const ProgressLock progressing;
  Nested nested;
  try {
    done = r->request.test();
    return MPI_SUCCESS;
  } catch (...) {
    done = true;
    // A freed call's failure is the team's: its next call reports it.
    return r->freed ? MPI_ERR_OTHER : fail_current(r->call, *r->record);
  }
}

// A copse request done: its status, and its handle freed (persistent: inactive).
void complete(MPI_Request* handle, CopseRequest* r, MPI_Status* status) {
  empty_status(status);
  {
    const ProgressLock progressing;  // progress_all reads these
    if (running(*r)) add_running(1, false);
    r->active = false;
  }
  if (r->persistent) return;
  forget(r);
  *handle = MPI_REQUEST_NULL;
}

// Every live copse request a little further (calls of other communicators
// than the one waited for), and the freed ones until done.
void progress_all() {
  if (g_live.load(std::memory_order_acquire) == 0) return;
  const ProgressLock progressing(std::try_to_lock);
  if (!progressing) return;  // another thread is at it
  // Under the lock, which no progress takes (a call done here keeps its
  // handle until its own test or wait): nothing copied, nothing allocated.
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  bool released = false;
  for (CopseRequest*& r : g_requests) {
    bool done = false;
    test_ours(r, done);  // a failure is reported by the request's own test or wait
    if (done && r->freed) {
      if (running(*r)) add_running(1, false);
      g_slots.give_back(r);
      r = nullptr;
      released = true;
    }
  }
  if (released) {
    std::erase(g_requests, nullptr);
    g_live.store(g_requests.size(), std::memory_order_release);
  }
}

// Between polls: spin briefly, then yield the core, then sleep a little.
void pause(unsigned polls, std::chrono::steady_clock::time_point since) {
  if (polls < 64) return;
  if (std::chrono::steady_clock::now() - since > std::chrono::milliseconds(10))
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  else
    sched_yield();
}

MPI_Status* status_at(MPI_Status* statuses, int i) {
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : statuses + i;
}

bool any_ours(int count, const MPI_Request* requests) {
  if (g_live.load(std::memory_order_acquire) == 0 || !requests) return false;
  return std::any_of(requests, requests + count, [](MPI_Request h) { return ours(h) != nullptr; });
}

}  // namespace

std::atomic<bool> ProgressLock::multiple{true};
void ProgressLock::lock() { g_progress_mutex.lock(); }
bool ProgressLock::try_lock() { return g_progress_mutex.try_lock(); }
void ProgressLock::unlock() { g_progress_mutex.unlock(); }

CopseRequest* new_request() {
  int level = MPI_THREAD_MULTIPLE;
  if (PMPI_Query_thread(&level) == MPI_SUCCESS)
    ProgressLock::multiple.store(level == MPI_THREAD_MULTIPLE, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  // Room for one more: register_request then allocates nothing.
  if (g_requests.size() == g_requests.capacity()) g_requests.reserve(2 * g_requests.size() + 8);
  return g_slots.take();
}

void give_back(CopseRequest* r) {
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  g_slots.give_back(r);
}

MPI_Request register_request(CopseRequest* r) {
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  g_requests.push_back(r);
  g_live.store(g_requests.size(), std::memory_order_release);
  if (running(*r)) add_running(1, true);  // under the progress lock: serve() holds it
  r->live.store(true, std::memory_order_release);
  return reinterpret_cast<MPI_Request>(r);
}

CopseRequest* ours(MPI_Request handle) {
  if (handle == MPI_REQUEST_NULL || g_live.load(std::memory_order_acquire) == 0) return nullptr;
  return g_slots.find(handle);
}

int fail_current(const char* call, const Record& r) {
  try {
    throw;
  } catch (const Error& e) {
    return fail(call, r, e.what(), error_class(e.kind()));
  } catch (const std::bad_alloc&) {
    return fail(call, r, "out of memory", MPI_ERR_NO_MEM);
  } catch (const std::exception& e) {
    return fail(call, r, e.what(), MPI_ERR_INTERN);
  }
}

int test(MPI_Request* request, int* flag, MPI_Status* status) {
  CopseRequest* r = request ? ours(*request) : nullptr;
  if (!r) {
    progress_all();
    return PMPI_Test(request, flag, status);
  }
  bool done = false;
  const int error = test_ours(r, done);
  *flag = done;
  if (done) complete(request, r, status);
  return error;
}

int wait(MPI_Request* request, MPI_Status* status) {
  if (g_live.load(std::memory_order_acquire) == 0) return PMPI_Wait(request, status);
  CopseRequest* r = request ? ours(*request) : nullptr;
  // Done already -- a persistent 8-byte allreduce's MPI_Start finishes the
  // call where every peer had posted before it, as the late process's
  // does: only the bookkeeping, which lies on the path from this call's end
  // to the next call's post. (Not under MPI_THREAD_MULTIPLE: another thread
  // may be progressing the call.)
  if (r && running(*r) && !ProgressLock::multiple.load(std::memory_order_relaxed) && r->request.done()) {
    complete(request, r, status);
    return MPI_SUCCESS;
  }
  // The only copse call that may be running, and no other thread in MPI:
  // waited for in the call's own wait, as the blocking collective waits
  // (the direct reduce's spin, with its timeout and failure checks), instead
  // of polls -- where that wait allocates nothing (a schedule's waits make
  // their policy when they block: a persistent call's wait must not). With another copse call running
  // elsewhere this wait must progress it too (its peers may wait for it
  // before they reach this one); under MPI_THREAD_MULTIPLE another thread
  // may need the progress lock meanwhile: both poll.
  if (!r || !running(*r) || g_running.load(std::memory_order_relaxed) != 1 ||
      ProgressLock::multiple.load(std::memory_order_relaxed) || !r->request.waits_without_allocating())
    return waitall(1, request, status);
  int error = MPI_SUCCESS;
  {
    Nested nested;
    try {
      r->request.wait();
    } catch (...) {
      error = fail_current(r->call, *r->record);
    }
  }
  complete(request, r, status);
  return error;
}

void finish_outstanding(Comm& comm) {
  // Below MPI_THREAD_MULTIPLE no other thread is in MPI; with no copse call
  // running there is nothing to finish: the blocking call's own drain is
  // enough, and this costs two loads.
  if (!ProgressLock::multiple.load(std::memory_order_relaxed) || g_running.load(std::memory_order_relaxed) == 0) return;
  const auto since = std::chrono::steady_clock::now();
  for (unsigned polls = 0;; ++polls) {
    {
      const ProgressLock progressing;
      if (comm.test_outstanding()) return;
    }
    progress_all();  // other communicators' calls, which peers may wait for first
    pause(polls, since);
  }
}

int waitall(int count, MPI_Request* requests, MPI_Status* statuses) {
  if (!any_ours(count, requests) && g_live.load(std::memory_order_acquire) == 0)
    return PMPI_Waitall(count, requests, statuses);
  // Which are done, and which are copse's (looked up once: the loop is a
  // persistent 8-byte call's whole wait): on the stack for a few (a
  // persistent call's wait allocates nothing).
  Few<char> done(count);
  Few<CopseRequest*> mine(count);
  std::size_t running_here = 0;  // of copse's, those counted in g_running
  for (int i = 0; i < count; ++i)
    if ((mine[i] = ours(requests[i]))) running_here += running(*mine[i]);
  int error = MPI_SUCCESS;
  const auto since = std::chrono::steady_clock::now();
  for (unsigned polls = 0;; ++polls) {
    bool all = true;
    for (int i = 0; i < count; ++i) {
      if (done[i]) continue;
      MPI_Status* status = status_at(statuses, i);
      int rc = MPI_SUCCESS, flag = 0;
      if (CopseRequest* r = mine[i]) {
        bool finished = false;
        rc = test_ours(r, finished);
        if ((flag = finished)) {
          if (running(*r)) --running_here;  // complete() no longer counts it
          complete(&requests[i], r, status);
        }
      } else {
        rc = PMPI_Test(&requests[i], &flag, status);
        if (rc != MPI_SUCCESS) flag = 1;
      }
      if (error == MPI_SUCCESS) error = rc;
      done[i] = static_cast<char>(flag);
      all = all && flag;
    }
    if (all) return error;
    // Other communicators' calls (and freed ones) go on too, when there are any.
    if (g_running.load(std::memory_order_relaxed) > running_here) progress_all();
    pause(polls, since);
  }
}

int testall(int count, MPI_Request* requests, int* flag, MPI_Status* statuses) {
  if (!any_ours(count, requests)) {
    progress_all();
    return PMPI_Testall(count, requests, flag, statuses);
  }
  // MPI changes no request unless all are done: copse's first (their
  // progress changes no handle), then the library's all at once.
  std::vector<MPI_Request> library;
  std::vector<int> at;
  bool all = true;
  for (int i = 0; i < count; ++i) {
    if (CopseRequest* r = ours(requests[i])) {
      bool done = false;
      if (const int rc = test_ours(r, done); rc != MPI_SUCCESS) return rc;
      all = all && done;
    } else {
      library.push_back(requests[i]);
      at.push_back(i);
    }
  }
  *flag = 0;
  if (!all) return MPI_SUCCESS;
  std::vector<MPI_Status> library_statuses(library.size());
  int library_done = 1;
  const int rc = PMPI_Testall(static_cast<int>(library.size()), library.data(), &library_done, library_statuses.data());
  if (rc != MPI_SUCCESS || !library_done) return rc;
  for (std::size_t k = 0; k < library.size(); ++k) {
    requests[at[k]] = library[k];
    if (statuses != MPI_STATUSES_IGNORE) statuses[at[k]] = library_statuses[k];
  }
  for (int i = 0; i < count; ++i)
    if (CopseRequest* r = ours(requests[i])) complete(&requests[i], r, status_at(statuses, i));
  *flag = 1;
  return MPI_SUCCESS;
}

namespace {

// The library's requests of `requests` (not copse's, not null), with their indices.
struct LibraryPart {
  std::vector<MPI_Request> handles;
  std::vector<int> at;
  LibraryPart(int count, const MPI_Request* requests) {
    for (int i = 0; i < count; ++i)
      if (requests[i] != MPI_REQUEST_NULL && !ours(requests[i])) handles.push_back(requests[i]), at.push_back(i);
  }
  int size() const { return static_cast<int>(handles.size()); }
};

// One pass of MPI_Waitany/Testany over copse's requests, then the library's
// (tested together: MPI_Testany knows which are inactive). True when the
// call's answer is final: one completed (*index), or none active at all
// (*index MPI_UNDEFINED); `rc` is the error to return then.
bool any_pass(int count, MPI_Request* requests, LibraryPart& library, int* index, MPI_Status* status, int& rc) {
  bool any_active = false;
  rc = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) {
    CopseRequest* r = ours(requests[i]);
    if (!r || (r->persistent && !r->active)) continue;
    any_active = true;
    bool done = false;
    rc = test_ours(r, done);
    if (done) {
      *index = i;
      complete(&requests[i], r, status);
      return true;
    }
  }
  int k = MPI_UNDEFINED, flag = 0;
  if (library.size() > 0) {
    rc = PMPI_Testany(library.size(), library.handles.data(), &k, &flag, status);
    if (rc != MPI_SUCCESS) return true;
    if (flag && k != MPI_UNDEFINED) {
      requests[library.at[static_cast<std::size_t>(k)]] = library.handles[static_cast<std::size_t>(k)];
      *index = library.at[static_cast<std::size_t>(k)];
      return true;
    }
  }
  if (!any_active && (library.size() == 0 || flag)) {  // nothing active at all
    *index = MPI_UNDEFINED;
    empty_status(status);
    return true;
  }
  return false;
}

// One pass of MPI_Waitsome/Testsome: every completed request's index and
// status, copse's first, then the library's (tested together, as
// MPI_Testsome knows which are inactive); *outcount MPI_UNDEFINED when none
// is active at all.
int some_pass(int count, MPI_Request* requests, LibraryPart& library, int* outcount, int* indices,
              MPI_Status* statuses) {
  int out = 0, rc = MPI_SUCCESS;
  bool any_active = false;
  for (int i = 0; i < count; ++i) {
    CopseRequest* r = ours(requests[i]);
    if (!r || (r->persistent && !r->active)) continue;
    any_active = true;
    bool done = false;
    if (const int error = test_ours(r, done); rc == MPI_SUCCESS) rc = error;
    if (!done) continue;
    complete(&requests[i], r, status_at(statuses, out));
    indices[out++] = i;
  }
  if (library.size() > 0) {
    int done = MPI_UNDEFINED;
    std::vector<int> which(library.handles.size());
    std::vector<MPI_Status> library_statuses(statuses == MPI_STATUSES_IGNORE ? 0 : library.handles.size());
    const int error = PMPI_Testsome(library.size(), library.handles.data(), &done, which.data(),
                                    statuses == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : library_statuses.data());
    if (rc == MPI_SUCCESS) rc = error;
    if (done != MPI_UNDEFINED) {
      any_active = true;
      for (int k = 0; k < done; ++k) {
        const auto j = static_cast<std::size_t>(which[static_cast<std::size_t>(k)]);
        requests[library.at[j]] = library.handles[j];
        if (statuses != MPI_STATUSES_IGNORE) statuses[out] = library_statuses[static_cast<std::size_t>(k)];
        indices[out++] = library.at[j];
      }
    }
  }
  *outcount = out == 0 && !any_active ? MPI_UNDEFINED : out;
  return rc;
}

}  // namespace

int waitany(int count, MPI_Request* requests, int* index, MPI_Status* status) {
  if (!any_ours(count, requests)) return PMPI_Waitany(count, requests, index, status);
  LibraryPart library(count, requests);
  const auto since = std::chrono::steady_clock::now();
  for (unsigned polls = 0;; ++polls) {
    int rc = MPI_SUCCESS;
    if (any_pass(count, requests, library, index, status, rc)) return rc;
    progress_all();
    pause(polls, since);
  }
}

int testany(int count, MPI_Request* requests, int* index, int* flag, MPI_Status* status) {
  if (!any_ours(count, requests)) {
    progress_all();
    return PMPI_Testany(count, requests, index, flag, status);
  }
  LibraryPart library(count, requests);
  int rc = MPI_SUCCESS;
  *flag = any_pass(count, requests, library, index, status, rc);
  if (!*flag) *index = MPI_UNDEFINED;
  return rc;
}

int waitsome(int count, MPI_Request* requests, int* outcount, int* indices, MPI_Status* statuses) {
  if (!any_ours(count, requests)) return PMPI_Waitsome(count, requests, outcount, indices, statuses);
  LibraryPart library(count, requests);
  const auto since = std::chrono::steady_clock::now();
  for (unsigned polls = 0;; ++polls) {
    const int rc = some_pass(count, requests, library, outcount, indices, statuses);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;
    progress_all();
    pause(polls, since);
  }
}

int testsome(int count, MPI_Request* requests, int* outcount, int* indices, MPI_Status* statuses) {
  if (!any_ours(count, requests)) {
    progress_all();
    return PMPI_Testsome(count, requests, outcount, indices, statuses);
  }
  LibraryPart library(count, requests);
  return some_pass(count, requests, library, outcount, indices, statuses);
}

int request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  CopseRequest* r = ours(request);
  if (!r) {
    progress_all();
    return PMPI_Request_get_status(request, flag, status);
  }
  // Progressed, never freed: the handle stays the application's.
  bool done = false;
  const int rc = test_ours(r, done);
  *flag = done;
  if (done) empty_status(status);
  return rc;
}

int cancel(MPI_Request* request) {
  CopseRequest* r = request ? ours(*request) : nullptr;
  if (!r) return PMPI_Cancel(request);
  return fail("MPI_Cancel", *r->record,
              std::string("a request of ") + r->call + " cannot be cancelled (MPI: erroneous for collectives)",
              MPI_ERR_REQUEST);
}

int request_free(MPI_Request* request) {
  CopseRequest* r = request ? ours(*request) : nullptr;
  if (!r) return PMPI_Request_free(request);
  *request = MPI_REQUEST_NULL;
  {
    // A call that may be running goes on (its rank's queue holds it; it
    // completes before any later collective of its communicator),
    // progressed by progress_all until done.
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    r->live.store(false, std::memory_order_release);
    r->freed = running(*r);
  }
  if (!r->freed) forget(r);
  return MPI_SUCCESS;
}

int start(MPI_Request* request) {
  CopseRequest* r = request ? ours(*request) : nullptr;
  if (!r) return PMPI_Start(request);
  const ProgressLock progressing;
  Nested nested;
  try {
    r->request.start();
    if (!r->active) add_running(1, true);
    r->active = true;
    return MPI_SUCCESS;
  } catch (...) {
    return fail_current(r->call, *r->record);
  }
}

int startall(int count, MPI_Request* requests) {
  for (int i = 0; i < count; ++i)
    if (const int rc = start(&requests[i]); rc != MPI_SUCCESS) return rc;
  return MPI_SUCCESS;
}

bool is_copse_request(MPI_Request handle) { return ours(handle) != nullptr; }

}  // namespace copse::mpi::interposer
