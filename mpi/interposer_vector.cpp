// The intercepted v-variants (issue 19): MPI_Allgatherv, MPI_Gatherv,
// MPI_Scatterv and MPI_Alltoallv, served by Comm's (runtime/communicator.hpp,
// runtime/vector_collectives.cpp) as bytes.
//
// Counts differ between processes, and gatherv's and scatterv's are the
// root's only, so no process can decide alone from a size the others share.
// The decision is therefore made alike everywhere in one of two ways:
//  - from the configuration alone, when it does not depend on the size
//    (mpi.serve leaves the collective to the library, or the decision table
//    gives it the library at every size, as the shipped one does): no talk;
//  - otherwise by one allreduce through the MPI library of the largest block
//    any process names and whether every process can hand its part to copse,
//    after which mpi.min_bytes, mpi.max_bytes and the table decide on that
//    largest block, the same on every process.
// Served: predefined contiguous datatypes whose size is their extent (counts
// and displacements become bytes), MPI_IN_PLACE where MPI allows it. Anything
// else -- derived or gapped datatypes, byte counts past int -- on any process
// sends the call to the MPI library on every process.
//
// The nonblocking forms (MPI_Iallgatherv, ...) must not wait for other
// processes when they start, so they cannot talk first: on a communicator
// whose Team exists and where the configuration alone does not decide, each
// starts a copse call whose first step is that agreement (an allreduce
// progressed as the call, in its place in copse's queue, so that every
// process decides in the same order) and whose deferral (LibraryDeferral
// below) starts the library's PMPI_I* on the Team's duplicate when the
// agreement gives the call to the library. The persistent forms
// (MPIX_*v_init) decide at init as the blocking calls do: copse's persistent
// calls plan, and so wait for every process, at init already.

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "mpi/datatype_layout.hpp"
#include "mpi/interposer_requests.hpp"
#include "runtime/pending.hpp"

namespace copse::mpi::interposer {

namespace {

// Counts and displacements of one buffer, in bytes.
struct ByteBlocks {
  std::vector<int> counts, displs;
  std::uint64_t most = 0;  // the largest block
  bool ok = true;          // representable (a contiguous type, ints)
};

// Bytes per element of `type` when it is contiguous with no gaps (its size
// is its extent), else 0.
MPI_Count plain_size(const State& s, MPI_Datatype type) {
  const auto l = layout_of(s.mapping, type, 1);
  return l && l->contiguous && l->size == l->extent ? l->size : 0;
}

ByteBlocks byte_blocks(const State& s, MPI_Datatype type, const int* counts, const int* displs, int n) {
  ByteBlocks b;
  const MPI_Count size = plain_size(s, type);
  if (size == 0 || !counts || !displs) return {{}, {}, 0, false};
  for (int v = 0; v < n; ++v) {
    const long long c = static_cast<long long>(counts[v]) * size, d = static_cast<long long>(displs[v]) * size;
    if (counts[v] < 0 || displs[v] < 0 || c > INT_MAX || d > INT_MAX) return {{}, {}, 0, false};
    b.counts.push_back(static_cast<int>(c));
    b.displs.push_back(static_cast<int>(d));
    b.most = std::max<std::uint64_t>(b.most, static_cast<std::uint64_t>(c));
  }
  return b;
}

// Whether the table gives `c` in `form` to the MPI library at every size on
// the record's communicator: every row that can match says mpi, and so does
// the fallback unless a row covers every size.
bool table_defers_all(const State& s, MpiCollective c, const Record& r, CallForm form) {
  if (!s.table) return false;
  bool covered = false;
  for (std::uint32_t i : r.rows(form, c)) {
    const DecisionRow& row = s.table->rows[i];
    if (row.use == Provider::copse) return false;
    covered = covered || (row.min_bytes == 0 && row.max_bytes == std::numeric_limits<std::uint64_t>::max());
  }
  return covered || s.table->fallback == Provider::mpi;
}

// The communicator's record when copse serves the call, decided alike on
// every process (see above); null otherwise. `most`: the largest block this
// process names, in bytes; `can`: it can hand its part to copse; `form`: the
// call's, whose table rows decide.
Record* agreed(State& s, MpiCollective c, MPI_Comm comm, int root, std::uint64_t most, bool can,
               CallForm form = CallForm::blocking) {
  if (!s.options.mpi.serves(c)) return nullptr;
  Record* r = record(s, comm);
  if (!r || root >= r->size || table_defers_all(s, c, *r, form)) return nullptr;
  const std::uint64_t mine[2] = {most, can ? 0U : 1U};
  std::uint64_t all[2] = {0, 0};
  if (PMPI_Allreduce(mine, all, 2, MPI_UINT64_T, MPI_MAX, comm) != MPI_SUCCESS || all[1] != 0) return nullptr;
  return s.serves(c, all[0], *r, form) ? r : nullptr;
}

// One block of `count` elements (a process's own side), in bytes.
ByteBlocks one_block(const State& s, MPI_Datatype type, int count) {
  const int displ = 0;
  return byte_blocks(s, type, &count, &displ, 1);
}

// A gatherv's or scatterv's parts as bytes: the root's blocks (`all`), this
// process's own block (`mine`; none in place, which is the root's only), and
// the record when copse serves the call.
struct Rooted {
  ByteBlocks all, mine;
  bool at_root = false;
  bool can = false;  // this process can hand its part to copse
  Record* r = nullptr;
  std::size_t own() const { return mine.counts.empty() ? 0 : static_cast<std::size_t>(mine.counts[0]); }
  std::uint64_t most() const { return at_root ? all.most : (mine.ok ? mine.most : 0); }
  const int* counts() const { return at_root ? all.counts.data() : nullptr; }
  const int* displs() const { return at_root ? all.displs.data() : nullptr; }
};

// Its parts as this process sees them, without talking.
Rooted rooted_parts(State& s, MPI_Comm comm, int root, bool in_place, MPI_Datatype root_type, const int* counts,
                    const int* displs, MPI_Datatype own_type, int own_count) {
  Rooted v;
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  v.at_root = rank == root;
  if (v.at_root) v.all = byte_blocks(s, root_type, counts, displs, size);
  if (!in_place) v.mine = one_block(s, own_type, own_count);
  v.can = (!v.at_root || v.all.ok) && (in_place ? v.at_root : v.mine.ok);
  return v;
}

Rooted rooted(State& s, MpiCollective c, MPI_Comm comm, int root, bool in_place, MPI_Datatype root_type,
              const int* counts, const int* displs, MPI_Datatype own_type, int own_count) {
  if (!s.options.mpi.serves(c) || root < 0) return {};
  Rooted v = rooted_parts(s, comm, root, in_place, root_type, counts, displs, own_type, own_count);
  v.r = agreed(s, c, comm, root, v.most(), v.can);
  return v;
}

// A nonblocking v-variant's verdict once its processes agreed -- the
// blocking call's rules on the largest block -- and, where the call goes to
// the MPI library, the library's PMPI_I* started on the Team's duplicate
// (runtime/pending.hpp's VectorDeferral).
class LibraryDeferral final : public VectorDeferral {
 public:
  using Start = std::function<int(MPI_Comm, MPI_Request*)>;
  LibraryDeferral(State& s, MpiCollective c, Record& r, bool refuses, Start start)
      : VectorDeferral(refuses), s_(s), c_(c), r_(r), start_(std::move(start)) {}
  bool runs_here(std::uint64_t most, bool any_refused) override {
    if (!any_refused && s_.serves(c_, most, r_, CallForm::nonblocking)) {
      s_.stats.served(c_, false);
      return true;
    }
    s_.stats.passed(c_, false);
    check(start_(r_.team->duplicate(), &request_));
    return false;
  }
  bool test(bool wait) override {
    int done = 1;
    check(wait ? PMPI_Wait(&request_, MPI_STATUS_IGNORE) : PMPI_Test(&request_, &done, MPI_STATUS_IGNORE));
    return done != 0;
  }

 private:
  static void check(int rc) {
    if (rc != MPI_SUCCESS)
      throw Error(ErrorKind::system,
                  "the MPI library's own call, to which copse deferred it, failed (error " + std::to_string(rc) + ")");
  }
  State& s_;
  MpiCollective c_;
  Record& r_;
  Start start_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// The record of a nonblocking or persistent v-variant copse may serve: its
// Team exists and the configuration alone does not give the call (in its
// `form`) to the library (then it goes there at once, as the blocking call
// does).
Record* deciding(State& s, MpiCollective c, MPI_Comm comm, CallForm form) {
  if (!s.options.mpi.serves(c)) return nullptr;
  Record* r = with_team(s, comm);
  return r && !table_defers_all(s, c, *r, form) ? r : nullptr;
}

// Starts a nonblocking v-variant as copse's call: `start(comm, deferral)`
// calls the Comm's, `library(comm, request)` is the library's on `comm`.
// `can`: this process can hand its part to copse.
template <class Start>
int start_vector(State& s, MpiCollective c, const char* call, Record& r, bool can, MPI_Request* request,
                 LibraryDeferral::Start library, Start&& start) {
  return start_request(call, r, request, false, [&](Comm& cc) {
    return start(cc, std::make_shared<LibraryDeferral>(s, c, r, !can, std::move(library)));
  });
}

}  // namespace

int allgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
               const int* displs, MPI_Datatype recv_type, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::allgatherv;
  State* s = active();
  if (!s) return PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm);
  const bool in_place = send == MPI_IN_PLACE;
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const TraceScope trace(s->tracer.get(), c, comm, recv_counts ? recv_counts[rank] : 0, recv_type, MPI_OP_NULL, -1);
  if (s->options.mpi.serves(c) && recv != MPI_IN_PLACE) {
    const ByteBlocks b = byte_blocks(*s, recv_type, recv_counts, displs, size);
    const ByteBlocks mine = in_place ? b : one_block(*s, send_type, send_count);
    const bool can = b.ok && mine.ok && (in_place || mine.counts[0] == b.counts[static_cast<std::size_t>(rank)]);
    if (Record* r = agreed(*s, c, comm, 0, b.most, can))
      return run(*s, c, "MPI_Allgatherv", *r, [&](Comm& cc) {
        cc.allgatherv(in_place ? recv : send, recv, b.counts.data(), b.displs.data(), DType::uint8);
      });
  }
  s->stats.passed(c);
  return PMPI_Allgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm);
}

int gatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
            const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::gatherv;
  State* s = active();
  if (!s) return PMPI_Gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm);
  const bool in_place = send == MPI_IN_PLACE;  // the root's only
  const TraceScope trace(s->tracer.get(), c, comm, in_place ? 0 : send_count, send_type, MPI_OP_NULL, root);
  if (const Rooted v = rooted(*s, c, comm, root, in_place, recv_type, recv_counts, displs, send_type, send_count); v.r)
    return run(*s, c, "MPI_Gatherv", *v.r, [&](Comm& cc) {
      cc.gatherv(in_place ? recv : send, v.own(), recv, v.counts(), v.displs(), DType::uint8, root);
    });
  s->stats.passed(c);
  return PMPI_Gatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm);
}

int scatterv(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
             int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::scatterv;
  State* s = active();
  if (!s) return PMPI_Scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm);
  const bool in_place = recv == MPI_IN_PLACE;  // the root's only
  const TraceScope trace(s->tracer.get(), c, comm, in_place ? 0 : recv_count, recv_type, MPI_OP_NULL, root);
  if (const Rooted v = rooted(*s, c, comm, root, in_place, send_type, send_counts, displs, recv_type, recv_count); v.r)
    return run(*s, c, "MPI_Scatterv", *v.r, [&](Comm& cc) {
      cc.scatterv(send, v.counts(), v.displs(), in_place ? const_cast<void*>(send) : recv, v.own(), DType::uint8, root);
    });
  s->stats.passed(c);
  return PMPI_Scatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm);
}

int alltoallv(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
              const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::alltoallv;
  State* s = active();
  if (!s)
    return PMPI_Alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm);
  const bool in_place = send == MPI_IN_PLACE;  // the blocks to send are recv's, by the receive counts
  int size = 1;
  PMPI_Comm_size(comm, &size);
  long long sent = 0;
  for (int v = 0; v < size && send_counts && !in_place; ++v) sent += send_counts[v];
  const TraceScope trace(s->tracer.get(), c, comm, sent, in_place ? recv_type : send_type, MPI_OP_NULL, -1);
  if (s->options.mpi.serves(c) && recv != MPI_IN_PLACE) {
    const ByteBlocks in = byte_blocks(*s, recv_type, recv_counts, recv_displs, size);
    const ByteBlocks out = in_place ? in : byte_blocks(*s, send_type, send_counts, send_displs, size);
    if (Record* r = agreed(*s, c, comm, 0, std::max(in.most, out.most), in.ok && out.ok))
      return run(*s, c, "MPI_Alltoallv", *r, [&](Comm& cc) {
        cc.alltoallv(in_place ? recv : send, out.counts.data(), out.displs.data(), recv, in.counts.data(),
                     in.displs.data(), DType::uint8);
      });
  }
  s->stats.passed(c);
  return PMPI_Alltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm);
}

// ---- nonblocking and persistent (see the top) ----

namespace {

int allgatherv_call(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                    const int* displs, MPI_Datatype recv_type, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::allgatherv;
  State* s = active();
  const bool in_place = send == MPI_IN_PLACE;
  if (Record* r = s && request && recv != MPI_IN_PLACE ? deciding(*s, c, comm, how.form()) : nullptr) {
    const ByteBlocks b = byte_blocks(*s, recv_type, recv_counts, displs, r->size);
    const ByteBlocks mine = in_place ? b : one_block(*s, send_type, send_count);
    const bool can = b.ok && mine.ok && (in_place || mine.counts[0] == b.counts[static_cast<std::size_t>(r->rank)]);
    const void* from = in_place ? recv : send;
    if (!how.persistent)
      return start_vector(
          *s, c, "MPI_Iallgatherv", *r, can, request,
          [=](MPI_Comm dup, MPI_Request* q) {
            return PMPI_Iallgatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, dup, q);
          },
          [&](Comm& cc, std::shared_ptr<VectorDeferral> d) {
            return cc.iallgatherv(from, recv, b.counts.data(), b.displs.data(), DType::uint8, std::move(d));
          });
    if (agreed(*s, c, comm, 0, b.most, can, CallForm::persistent))
      return serve(*s, c, "MPIX_Allgatherv_init", *r, request, true, [&](Comm& cc) {
        return cc.allgatherv_init(from, recv, b.counts.data(), b.displs.data(), DType::uint8);
      });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Iallgatherv, Allgatherv_init, send, send_count, send_type, recv, recv_counts, displs,
                            recv_type, comm);
}

int gatherv_call(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                 const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm, Started how,
                 MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::gatherv;
  State* s = active();
  const bool in_place = send == MPI_IN_PLACE;  // the root's only
  if (Record* r = s && request && root >= 0 ? deciding(*s, c, comm, how.form()) : nullptr; r && root < r->size) {
    const Rooted v = rooted_parts(*s, comm, root, in_place, recv_type, recv_counts, displs, send_type, send_count);
    const void* from = in_place ? recv : send;
    if (!how.persistent)
      return start_vector(
          *s, c, "MPI_Igatherv", *r, v.can, request,
          [=](MPI_Comm dup, MPI_Request* q) {
            return PMPI_Igatherv(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, dup, q);
          },
          [&](Comm& cc, std::shared_ptr<VectorDeferral> d) {
            return cc.igatherv(from, v.own(), recv, v.counts(), v.displs(), DType::uint8, root, std::move(d));
          });
    if (agreed(*s, c, comm, root, v.most(), v.can, CallForm::persistent))
      return serve(*s, c, "MPIX_Gatherv_init", *r, request, true, [&](Comm& cc) {
        return cc.gatherv_init(from, v.own(), recv, v.counts(), v.displs(), DType::uint8, root);
      });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Igatherv, Gatherv_init, send, send_count, send_type, recv, recv_counts, displs,
                            recv_type, root, comm);
}

int scatterv_call(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, Started how, MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::scatterv;
  State* s = active();
  const bool in_place = recv == MPI_IN_PLACE;  // the root's only: its block stays in send
  if (Record* r = s && request && root >= 0 ? deciding(*s, c, comm, how.form()) : nullptr; r && root < r->size) {
    const Rooted v = rooted_parts(*s, comm, root, in_place, send_type, send_counts, displs, recv_type, recv_count);
    void* to = in_place ? const_cast<void*>(send) : recv;
    if (!how.persistent)
      return start_vector(
          *s, c, "MPI_Iscatterv", *r, v.can, request,
          [=](MPI_Comm dup, MPI_Request* q) {
            return PMPI_Iscatterv(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, dup, q);
          },
          [&](Comm& cc, std::shared_ptr<VectorDeferral> d) {
            return cc.iscatterv(send, v.counts(), v.displs(), to, v.own(), DType::uint8, root, std::move(d));
          });
    if (agreed(*s, c, comm, root, v.most(), v.can, CallForm::persistent))
      return serve(*s, c, "MPIX_Scatterv_init", *r, request, true, [&](Comm& cc) {
        return cc.scatterv_init(send, v.counts(), v.displs(), to, v.own(), DType::uint8, root);
      });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Iscatterv, Scatterv_init, send, send_counts, displs, send_type, recv, recv_count,
                            recv_type, root, comm);
}

int alltoallv_call(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
                   const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm, Started how,
                   MPI_Request* request) {
  constexpr MpiCollective c = MpiCollective::alltoallv;
  State* s = active();
  const bool in_place = send == MPI_IN_PLACE;  // the blocks to send are recv's, by the receive counts
  if (Record* r = s && request && recv != MPI_IN_PLACE ? deciding(*s, c, comm, how.form()) : nullptr) {
    const ByteBlocks in = byte_blocks(*s, recv_type, recv_counts, recv_displs, r->size);
    const ByteBlocks out = in_place ? in : byte_blocks(*s, send_type, send_counts, send_displs, r->size);
    const bool can = in.ok && out.ok;
    const void* from = in_place ? recv : send;
    if (!how.persistent)
      return start_vector(
          *s, c, "MPI_Ialltoallv", *r, can, request,
          [=](MPI_Comm dup, MPI_Request* q) {
            return PMPI_Ialltoallv(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type,
                                   dup, q);
          },
          [&](Comm& cc, std::shared_ptr<VectorDeferral> d) {
            return cc.ialltoallv(from, out.counts.data(), out.displs.data(), recv, in.counts.data(), in.displs.data(),
                                 DType::uint8, std::move(d));
          });
    if (agreed(*s, c, comm, 0, std::max(in.most, out.most), can, CallForm::persistent))
      return serve(*s, c, "MPIX_Alltoallv_init", *r, request, true, [&](Comm& cc) {
        return cc.alltoallv_init(from, out.counts.data(), out.displs.data(), recv, in.counts.data(), in.displs.data(),
                                 DType::uint8);
      });
  }
  if (s) s->stats.passed(c, how.persistent);
  return COPSE_LIBRARY_CALL(how, Ialltoallv, Alltoallv_init, send, send_counts, send_displs, send_type, recv,
                            recv_counts, recv_displs, recv_type, comm);
}

}  // namespace

int iallgatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                const int* displs, MPI_Datatype recv_type, MPI_Comm comm, MPI_Request* request) {
  return allgatherv_call(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, {}, request);
}
int allgatherv_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                    const int* displs, MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return allgatherv_call(send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, {true, info},
                         request);
}
int igatherv(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
             const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return gatherv_call(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm, {}, request);
}
int gatherv_init(const void* send, int send_count, MPI_Datatype send_type, void* recv, const int* recv_counts,
                 const int* displs, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info,
                 MPI_Request* request) {
  return gatherv_call(send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm, {true, info},
                      request);
}
int iscatterv(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
              int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Request* request) {
  return scatterv_call(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm, {}, request);
}
int scatterv_init(const void* send, const int* send_counts, const int* displs, MPI_Datatype send_type, void* recv,
                  int recv_count, MPI_Datatype recv_type, int root, MPI_Comm comm, MPI_Info info,
                  MPI_Request* request) {
  return scatterv_call(send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm, {true, info},
                       request);
}
int ialltoallv(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
               const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm,
               MPI_Request* request) {
  return alltoallv_call(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm, {},
                        request);
}
int alltoallv_init(const void* send, const int* send_counts, const int* send_displs, MPI_Datatype send_type, void* recv,
                   const int* recv_counts, const int* recv_displs, MPI_Datatype recv_type, MPI_Comm comm, MPI_Info info,
                   MPI_Request* request) {
  return alltoallv_call(send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs, recv_type, comm,
                        {true, info}, request);
}

}  // namespace copse::mpi::interposer
