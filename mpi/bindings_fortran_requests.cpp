// The Fortran spellings of the nonblocking and persistent collectives and of
// the request calls libcopse_mpi.so serves (C's: bindings_nonblocking.cpp).
// Open MPI's Fortran bindings call PMPI_Iallreduce, PMPI_Wait, ... directly
// (bindings_fortran.cpp says why and how the spellings are made), so without
// these a Fortran program's MPI_Iallreduce never reaches copse, and its
// MPI_Wait would hand a copse request to the library.
//
// Request handles. A Fortran request is an INTEGER; Open MPI's are
// non-negative indices into its table of C requests (MPI_REQUEST_NULL is 0),
// reached by PMPI_Request_f2c and PMPI_Request_c2f. A copse request is a C
// MPI_Request that is really copse's pointer (interposer_requests.cpp), which
// PMPI_Request_c2f must never see, so copse's get handles of their own, that
// no Open MPI handle can be: -1 - i for slot i of a table here (free slots
// reused). A call converts each handle to C (ours from the table, the
// library's by PMPI_Request_f2c), makes C's call, and converts back each
// handle the call changed: a completed (or freed) copse request frees its
// slot and becomes MPI_REQUEST_NULL's Fortran value, as does a completed
// library request; a persistent request's handle never changes, so it keeps
// its slot until MPI_Request_free. A program that starts no copse request
// meets only PMPI_Request_f2c and PMPI_Request_c2f around C's call, as in
// Open MPI's own binding, and C's request calls pass those requests on
// unchanged.
//
// Statuses: a Fortran status is MPI_STATUS_SIZE integers, written from C's
// by PMPI_Status_c2f where the call completed a request; Fortran's
// MPI_STATUS_IGNORE and MPI_STATUSES_IGNORE (common blocks, found as
// MPI_IN_PLACE is) become C's. f08's TYPE(MPI_Status) has C's layout, and
// Open MPI's f08 bindings pass it on as an integer array: the same here.
// LOGICAL flags are written 1 or 0 (gfortran's .true. and .false., Open
// MPI's OMPI_FORTRAN_VALUE_TRUE); indices are Fortran's, from 1.

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's MPIX_*_init
#endif

#include <cstddef>
#include <mutex>
#include <vector>

#include "mpi/bindings_fortran.hpp"
#include "mpi/few.hpp"
#include "mpi/interposer.hpp"

namespace copse::mpi::interposer {

namespace {

// The Fortran handles of copse's requests: slot i is handle -1 - i.
class CopseHandles {
 public:
  static bool ours(MPI_Fint handle) { return handle < 0; }

  MPI_Fint add(MPI_Request request) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t i = slots_.size();
    if (free_.empty()) {
      slots_.push_back(request);
    } else {
      i = free_.back();
      free_.pop_back();
      slots_[i] = request;
    }
    return static_cast<MPI_Fint>(-1 - static_cast<long long>(i));
  }

  // The C request of handle `handle` (ours); MPI_REQUEST_NULL for a slot
  // not in use (a freed handle, used again: erroneous in MPI).
  MPI_Request get(MPI_Fint handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t i = slot(handle);
    return i < slots_.size() ? slots_[i] : MPI_REQUEST_NULL;
  }

  void release(MPI_Fint handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t i = slot(handle);
    if (i >= slots_.size() || slots_[i] == MPI_REQUEST_NULL) return;
    slots_[i] = MPI_REQUEST_NULL;
    free_.push_back(i);
  }

 private:
  static std::size_t slot(MPI_Fint handle) { return static_cast<std::size_t>(-1 - static_cast<long long>(handle)); }
  std::mutex mutex_;
  std::vector<MPI_Request> slots_;
  std::vector<std::size_t> free_;
};

CopseHandles g_handles;

MPI_Request to_c(MPI_Fint handle) {
  return CopseHandles::ours(handle) ? g_handles.get(handle) : PMPI_Request_f2c(handle);
}

MPI_Fint logical(int flag) { return flag ? 1 : 0; }

MPI_Fint fortran_index(int index) { return index == MPI_UNDEFINED ? MPI_UNDEFINED : index + 1; }

// A Fortran array of request handles as C's, and back.
class Requests {
 public:
  Requests(int count, MPI_Fint* handles) : count_(count), handles_(handles), c_(count), before_(count) {
    for (int i = 0; i < count; ++i) c_[i] = before_[i] = to_c(handles[i]);
  }
  MPI_Request* c() { return c_.data(); }
  // After C's call, whatever it returned: each handle it changed.
  void back() {
    for (int i = 0; i < count_; ++i) {
      if (c_[i] == before_[i]) continue;
      if (CopseHandles::ours(handles_[i])) g_handles.release(handles_[i]);
      handles_[i] = to_fortran(c_[i]);
    }
  }

 private:
  int count_;
  MPI_Fint* handles_;
  Few<MPI_Request> c_, before_;
};

// Fortran statuses (one, or an array) as C's; Fortran's ignore constants as C's.
class Statuses {
 public:
  Statuses(int count, MPI_Fint* statuses, MPI_Status* ignore)
      : fortran_(is_fortran_status_ignore(statuses) || is_fortran_statuses_ignore(statuses) ? nullptr : statuses),
        ignore_(ignore),
        c_(fortran_ ? count : 0) {}
  MPI_Status* c() { return fortran_ ? c_.data() : ignore_; }
  // C's status i into Fortran's.
  void back(int i) {
    if (fortran_) PMPI_Status_c2f(&c_[i], fortran_ + static_cast<std::ptrdiff_t>(i) * kInts);
  }

 private:
  static constexpr std::ptrdiff_t kInts = sizeof(MPI_Status) / sizeof(MPI_Fint);  // MPI_STATUS_SIZE
  MPI_Fint* fortran_;                                                             // null: ignored
  MPI_Status* ignore_;
  Few<MPI_Status> c_;
};

// A call of `count` requests that returns no status (MPI_Start, MPI_Cancel,
// MPI_Request_free: a freed request's handle changes): `call(requests)` is C's.
template <class Call>
void handles_only(int count, MPI_Fint* requests, MPI_Fint* ierror, Call call) {
  Requests r(count, requests);
  const int rc = call(r.c());
  r.back();
  set(ierror, rc);
}

// MPI_Waitsome and MPI_Testsome: `call` is C's. `indices` go through as
// they are (MPI_Fint is int), then from 1.
template <class Call>
void some(Call call, MPI_Fint* count, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices, MPI_Fint* statuses,
          MPI_Fint* ierror) {
  Requests r(*count, requests);
  Statuses s(*count, statuses, MPI_STATUSES_IGNORE);
  int out = MPI_UNDEFINED;
  const int rc = call(*count, r.c(), &out, indices, s.c());
  r.back();
  if (rc == MPI_SUCCESS) {
    *outcount = out;
    for (int k = 0; out != MPI_UNDEFINED && k < out; ++k) {
      indices[k] = fortran_index(indices[k]);
      s.back(k);
    }
  }
  set(ierror, rc);
}

}  // namespace

MPI_Fint to_fortran(MPI_Request request) {
  return is_copse_request(request) ? g_handles.add(request) : PMPI_Request_c2f(request);
}

}  // namespace copse::mpi::interposer

namespace ip = copse::mpi::interposer;

using ip::set;

extern "C" {

__attribute__((visibility("hidden"))) void copse_fortran_mpi_iallreduce(void* send, void* recv, MPI_Fint* count,
                                                                        MPI_Fint* type, MPI_Fint* op, MPI_Fint* comm,
                                                                        MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::iallreduce(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                          PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ireduce(void* send, void* recv, MPI_Fint* count,
                                                                     MPI_Fint* type, MPI_Fint* op, MPI_Fint* root,
                                                                     MPI_Fint* comm, MPI_Fint* request,
                                                                     MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::ireduce(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type), PMPI_Op_f2c(*op),
                       *root, PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ibcast(void* buffer, MPI_Fint* count, MPI_Fint* type,
                                                                    MPI_Fint* root, MPI_Fint* comm, MPI_Fint* request,
                                                                    MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::ibcast(ip::from_fortran(buffer), *count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ibarrier(MPI_Fint* comm, MPI_Fint* request,
                                                                      MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) { return ip::ibarrier(PMPI_Comm_f2c(*comm), c); });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_iallgather(void* send, MPI_Fint* send_count,
                                                                        MPI_Fint* send_type, void* recv,
                                                                        MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                        MPI_Fint* comm, MPI_Fint* request,
                                                                        MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::iallgather(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                          *recv_count, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ireduce_scatter_block(void* send, void* recv,
                                                                                   MPI_Fint* count, MPI_Fint* type,
                                                                                   MPI_Fint* op, MPI_Fint* comm,
                                                                                   MPI_Fint* request,
                                                                                   MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::ireduce_scatter_block(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                                     PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ireduce_scatter(void* send, void* recv, MPI_Fint* counts,
                                                                             MPI_Fint* type, MPI_Fint* op,
                                                                             MPI_Fint* comm, MPI_Fint* request,
                                                                             MPI_Fint* ierror) {
  static_assert(sizeof(MPI_Fint) == sizeof(int), "a Fortran INTEGER array is C's int array");
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::ireduce_scatter(ip::from_fortran(send), ip::from_fortran(recv), counts, PMPI_Type_f2c(*type),
                               PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_iscatter(void* send, MPI_Fint* send_count,
                                                                      MPI_Fint* send_type, void* recv,
                                                                      MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                      MPI_Fint* root, MPI_Fint* comm, MPI_Fint* request,
                                                                      MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::iscatter(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                        *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_igather(void* send, MPI_Fint* send_count,
                                                                     MPI_Fint* send_type, void* recv,
                                                                     MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                     MPI_Fint* root, MPI_Fint* comm, MPI_Fint* request,
                                                                     MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::igather(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                       *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm), c);
  });
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_ialltoall(void* send, MPI_Fint* send_count,
                                                                       MPI_Fint* send_type, void* recv,
                                                                       MPI_Fint* recv_count, MPI_Fint* recv_type,
                                                                       MPI_Fint* comm, MPI_Fint* request,
                                                                       MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::ialltoall(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                         *recv_count, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm), c);
  });
}

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
__attribute__((visibility("hidden"))) void copse_fortran_mpix_allreduce_init(void* send, void* recv, MPI_Fint* count,
                                                                             MPI_Fint* type, MPI_Fint* op,
                                                                             MPI_Fint* comm, MPI_Fint* info,
                                                                             MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::allreduce_init(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                              PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

#define COPSE_HIDDEN __attribute__((visibility("hidden")))
COPSE_HIDDEN void copse_fortran_mpix_reduce_init(void* send, void* recv, MPI_Fint* count, MPI_Fint* type, MPI_Fint* op,
                                                 MPI_Fint* root, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request,
                                                 MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::reduce_init(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                           PMPI_Op_f2c(*op), *root, PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

COPSE_HIDDEN void copse_fortran_mpix_reduce_scatter_block_init(void* send, void* recv, MPI_Fint* count, MPI_Fint* type,
                                                               MPI_Fint* op, MPI_Fint* comm, MPI_Fint* info,
                                                               MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::reduce_scatter_block_init(ip::from_fortran(send), ip::from_fortran(recv), *count, PMPI_Type_f2c(*type),
                                         PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

COPSE_HIDDEN void copse_fortran_mpix_reduce_scatter_init(void* send, void* recv, MPI_Fint* counts, MPI_Fint* type,
                                                         MPI_Fint* op, MPI_Fint* comm, MPI_Fint* info,
                                                         MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::reduce_scatter_init(ip::from_fortran(send), ip::from_fortran(recv), counts, PMPI_Type_f2c(*type),
                                   PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

COPSE_HIDDEN void copse_fortran_mpix_barrier_init(MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror,
                  [&](MPI_Request* c) { return ip::barrier_init(PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c); });
}

COPSE_HIDDEN void copse_fortran_mpix_bcast_init(void* buffer, MPI_Fint* count, MPI_Fint* type, MPI_Fint* root,
                                                MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::bcast_init(ip::from_fortran(buffer), *count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm),
                          PMPI_Info_f2c(*info), c);
  });
}

// allgather, scatter, gather and alltoall: (send, count, type, recv, count, type, [root,] comm, info, request).
COPSE_HIDDEN void copse_fortran_mpix_allgather_init(void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv,
                                                    MPI_Fint* recv_count, MPI_Fint* recv_type, MPI_Fint* comm,
                                                    MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::allgather_init(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                              *recv_count, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

COPSE_HIDDEN void copse_fortran_mpix_alltoall_init(void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv,
                                                   MPI_Fint* recv_count, MPI_Fint* recv_type, MPI_Fint* comm,
                                                   MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::alltoall_init(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                             *recv_count, PMPI_Type_f2c(*recv_type), PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), c);
  });
}

COPSE_HIDDEN void copse_fortran_mpix_scatter_init(void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv,
                                                  MPI_Fint* recv_count, MPI_Fint* recv_type, MPI_Fint* root,
                                                  MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::scatter_init(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                            *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info),
                            c);
  });
}

COPSE_HIDDEN void copse_fortran_mpix_gather_init(void* send, MPI_Fint* send_count, MPI_Fint* send_type, void* recv,
                                                 MPI_Fint* recv_count, MPI_Fint* recv_type, MPI_Fint* root,
                                                 MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierror) {
  ip::new_request(request, ierror, [&](MPI_Request* c) {
    return ip::gather_init(ip::from_fortran(send), *send_count, PMPI_Type_f2c(*send_type), ip::from_fortran(recv),
                           *recv_count, PMPI_Type_f2c(*recv_type), *root, PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info),
                           c);
  });
}
#undef COPSE_HIDDEN
#endif

__attribute__((visibility("hidden"))) void copse_fortran_mpi_test(MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status,
                                                                  MPI_Fint* ierror) {
  ip::Requests r(1, request);
  ip::Statuses s(1, status, MPI_STATUS_IGNORE);
  int done = 0;
  const int rc = ip::test(r.c(), &done, s.c());
  r.back();
  if (rc == MPI_SUCCESS) {
    *flag = ip::logical(done);
    if (done) s.back(0);
  }
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_wait(MPI_Fint* request, MPI_Fint* status,
                                                                  MPI_Fint* ierror) {
  ip::Requests r(1, request);
  ip::Statuses s(1, status, MPI_STATUS_IGNORE);
  const int rc = ip::wait(r.c(), s.c());
  r.back();
  if (rc == MPI_SUCCESS) s.back(0);
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_testall(MPI_Fint* count, MPI_Fint* requests,
                                                                     MPI_Fint* flag, MPI_Fint* statuses,
                                                                     MPI_Fint* ierror) {
  ip::Requests r(*count, requests);
  ip::Statuses s(*count, statuses, MPI_STATUSES_IGNORE);
  int done = 0;
  const int rc = ip::testall(*count, r.c(), &done, s.c());
  r.back();
  if (rc == MPI_SUCCESS) {
    *flag = ip::logical(done);
    for (int i = 0; done && i < *count; ++i) s.back(i);
  }
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_waitall(MPI_Fint* count, MPI_Fint* requests,
                                                                     MPI_Fint* statuses, MPI_Fint* ierror) {
  ip::Requests r(*count, requests);
  ip::Statuses s(*count, statuses, MPI_STATUSES_IGNORE);
  const int rc = ip::waitall(*count, r.c(), s.c());
  r.back();
  for (int i = 0; rc == MPI_SUCCESS && i < *count; ++i) s.back(i);
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_waitany(MPI_Fint* count, MPI_Fint* requests,
                                                                     MPI_Fint* index, MPI_Fint* status,
                                                                     MPI_Fint* ierror) {
  ip::Requests r(*count, requests);
  ip::Statuses s(1, status, MPI_STATUS_IGNORE);
  int i = MPI_UNDEFINED;
  const int rc = ip::waitany(*count, r.c(), &i, s.c());
  r.back();
  if (rc == MPI_SUCCESS) {
    *index = ip::fortran_index(i);
    s.back(0);
  }
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_testany(MPI_Fint* count, MPI_Fint* requests,
                                                                     MPI_Fint* index, MPI_Fint* flag, MPI_Fint* status,
                                                                     MPI_Fint* ierror) {
  ip::Requests r(*count, requests);
  ip::Statuses s(1, status, MPI_STATUS_IGNORE);
  int i = MPI_UNDEFINED, done = 0;
  const int rc = ip::testany(*count, r.c(), &i, &done, s.c());
  r.back();
  if (rc == MPI_SUCCESS) {
    *index = ip::fortran_index(i);
    *flag = ip::logical(done);
    if (done) s.back(0);
  }
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_waitsome(MPI_Fint* count, MPI_Fint* requests,
                                                                      MPI_Fint* outcount, MPI_Fint* indices,
                                                                      MPI_Fint* statuses, MPI_Fint* ierror) {
  ip::some(ip::waitsome, count, requests, outcount, indices, statuses, ierror);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_testsome(MPI_Fint* count, MPI_Fint* requests,
                                                                      MPI_Fint* outcount, MPI_Fint* indices,
                                                                      MPI_Fint* statuses, MPI_Fint* ierror) {
  ip::some(ip::testsome, count, requests, outcount, indices, statuses, ierror);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_request_get_status(MPI_Fint* request, MPI_Fint* flag,
                                                                                MPI_Fint* status, MPI_Fint* ierror) {
  ip::Statuses s(1, status, MPI_STATUS_IGNORE);
  int done = 0;
  const int rc = ip::request_get_status(ip::to_c(*request), &done, s.c());  // the handle stays
  if (rc == MPI_SUCCESS) {
    *flag = ip::logical(done);
    if (done) s.back(0);
  }
  set(ierror, rc);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_cancel(MPI_Fint* request, MPI_Fint* ierror) {
  ip::handles_only(1, request, ierror, ip::cancel);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_request_free(MPI_Fint* request, MPI_Fint* ierror) {
  ip::handles_only(1, request, ierror, ip::request_free);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_start(MPI_Fint* request, MPI_Fint* ierror) {
  ip::handles_only(1, request, ierror, ip::start);
}

__attribute__((visibility("hidden"))) void copse_fortran_mpi_startall(MPI_Fint* count, MPI_Fint* requests,
                                                                      MPI_Fint* ierror) {
  ip::handles_only(*count, requests, ierror, [&](MPI_Request* c) { return ip::startall(*count, c); });
}

}  // extern "C"

COPSE_FORTRAN_SPELLINGS(mpi_iallreduce, MPI_IALLREDUCE,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ireduce, MPI_IREDUCE,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ibcast, MPI_IBCAST,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ibarrier, MPI_IBARRIER, (MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_iallgather, MPI_IALLGATHER,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_iscatter, MPI_ISCATTER,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_igather, MPI_IGATHER,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_ialltoall, MPI_IALLTOALL,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
COPSE_FORTRAN_SPELLINGS(mpix_allreduce_init, MPIX_ALLREDUCE_INIT,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_reduce_init, MPIX_REDUCE_INIT,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_reduce_scatter_block_init, MPIX_REDUCE_SCATTER_BLOCK_INIT,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_reduce_scatter_init, MPIX_REDUCE_SCATTER_INIT,
                        (void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_barrier_init, MPIX_BARRIER_INIT, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_bcast_init, MPIX_BCAST_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_allgather_init, MPIX_ALLGATHER_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_alltoall_init, MPIX_ALLTOALL_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_scatter_init, MPIX_SCATTER_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpix_gather_init, MPIX_GATHER_INIT,
                        (void*, MPI_Fint*, MPI_Fint*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*,
                         MPI_Fint*, MPI_Fint*))
#endif
COPSE_FORTRAN_SPELLINGS(mpi_test, MPI_TEST, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_wait, MPI_WAIT, (MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_testall, MPI_TESTALL, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_waitall, MPI_WAITALL, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_waitany, MPI_WAITANY, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_testany, MPI_TESTANY, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_waitsome, MPI_WAITSOME, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_testsome, MPI_TESTSOME, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_request_get_status, MPI_REQUEST_GET_STATUS, (MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_cancel, MPI_CANCEL, (MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_request_free, MPI_REQUEST_FREE, (MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_start, MPI_START, (MPI_Fint*, MPI_Fint*))
COPSE_FORTRAN_SPELLINGS(mpi_startall, MPI_STARTALL, (MPI_Fint*, MPI_Fint*, MPI_Fint*))
