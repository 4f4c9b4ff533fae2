// The request calls (mpi/interposer.hpp): copse's requests progressed a step
// at a time (runtime/pending.hpp), the library's passed through. A wait
// polls rather than sleeps: while it waits, every live copse request and
// every library request it was given is progressed, and the MPI library
// with them, so that neither side's progress waits on the other's.

#include "mpi/interposer_requests.hpp"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace copse::mpi::interposer {

namespace {

std::mutex g_requests_mutex;
std::vector<CopseRequest*> g_requests;  // every live copse request
std::atomic<std::size_t> g_live{0};     // its size, read without the lock
// Held while a thread progresses copse's calls: a rank's queue is one
// thread's at a time, whichever threads call MPI_Test (MPI_THREAD_MULTIPLE).
// Recursive: progress_all tests requests under it.
std::recursive_mutex g_progress_mutex;

void forget(CopseRequest* r) {
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    std::erase(g_requests, r);
    g_live.store(g_requests.size(), std::memory_order_release);
  }
  delete r;
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
  if (r->persistent && !r->active) {
    done = true;
    return MPI_SUCCESS;
  }
  std::lock_guard<std::recursive_mutex> progressing(g_progress_mutex);
  Nested nested;
  try {
    done = r->request.test();
    return MPI_SUCCESS;
  } catch (...) {
    done = true;
    return fail_current(r->call, *r->record);
  }
}

// A copse request done: its status, and its handle freed (persistent: inactive).
void complete(MPI_Request* handle, CopseRequest* r, MPI_Status* status) {
  empty_status(status);
  if (r->persistent) {
    r->active = false;
    return;
  }
  forget(r);
  *handle = MPI_REQUEST_NULL;
}

// Every live copse request a little further (calls of other communicators
// than the one waited for, and those whose handles were freed while active).
void progress_all() {
  if (g_live.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::recursive_mutex> progressing(g_progress_mutex, std::try_to_lock);
  if (!progressing) return;  // another thread is at it
  // Under the lock, which no progress takes (a call done here keeps its
  // handle until its own test or wait): nothing copied, nothing allocated.
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  for (CopseRequest* r : g_requests) {
    bool done = false;
    test_ours(r, done);  // a failure is reported by the request's own test or wait
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

std::unique_lock<std::recursive_mutex> progress_lock() {
  return std::unique_lock<std::recursive_mutex>(g_progress_mutex);
}

MPI_Request register_request(CopseRequest* r) {
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  g_requests.push_back(r);
  g_live.store(g_requests.size(), std::memory_order_release);
  return reinterpret_cast<MPI_Request>(r);
}

CopseRequest* ours(MPI_Request handle) {
  if (handle == MPI_REQUEST_NULL || g_live.load(std::memory_order_acquire) == 0) return nullptr;
  auto* r = reinterpret_cast<CopseRequest*>(handle);
  std::lock_guard<std::mutex> lock(g_requests_mutex);
  return std::find(g_requests.begin(), g_requests.end(), r) != g_requests.end() ? r : nullptr;
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
  return waitall(1, request, status);
}

int waitall(int count, MPI_Request* requests, MPI_Status* statuses) {
  if (!any_ours(count, requests) && g_live.load(std::memory_order_acquire) == 0)
    return PMPI_Waitall(count, requests, statuses);
  // Which are done, and which are copse's (looked up once: the loop is a
  // persistent 8-byte call's whole wait): on the stack for a few (a
  // persistent call's wait allocates nothing).
  constexpr int kFew = 16;
  char few_done[kFew] = {};
  CopseRequest* few_ours[kFew] = {};
  std::vector<char> many_done(count > kFew ? static_cast<std::size_t>(count) : 0, 0);
  std::vector<CopseRequest*> many_ours(count > kFew ? static_cast<std::size_t>(count) : 0, nullptr);
  char* done = count > kFew ? many_done.data() : few_done;
  CopseRequest** mine = count > kFew ? many_ours.data() : few_ours;
  std::size_t copse_here = 0;
  for (int i = 0; i < count; ++i) copse_here += (mine[i] = ours(requests[i])) != nullptr;
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
          if (!r->persistent) --copse_here;  // complete() forgets it: no longer live
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
    if (g_live.load(std::memory_order_acquire) > copse_here) progress_all();
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
  // An active call goes on (its rank's queue holds it) and completes
  // before any later collective of its communicator.
  forget(r);
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

int start(MPI_Request* request) {
  CopseRequest* r = request ? ours(*request) : nullptr;
  if (!r) return PMPI_Start(request);
  std::lock_guard<std::recursive_mutex> progressing(g_progress_mutex);
  Nested nested;
  try {
    r->request.start();
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
