#pragma once
// The interposer's state, shared by its two files: mpi/interposer.cpp (set-up,
// teardown, the reductions and barrier) and mpi/interposer_moving.cpp (the
// collectives that only move bytes: bcast, allgather, scatter, gather,
// alltoall). Private to libcopse_mpi.so; see mpi/interposer.hpp for what is
// served and why.

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/decision_table.hpp"
#include "mpi/datatype_layout.hpp"
#include "mpi/interposer.hpp"
#include "mpi/options.hpp"
#include "mpi/stats.hpp"
#include "mpi/trace.hpp"

namespace copse::mpi::interposer {

// Read by every intercepted call: the initial-exec model makes that a plain
// load instead of a call to __tls_get_addr (the library is preloaded or
// linked, so its TLS is in the initial block; a dlopen finds room for one int
// in glibc's static TLS surplus). Nested's count.
extern __attribute__((tls_model("initial-exec"))) thread_local int t_nested;

// One per communicator that reached a call copse could serve, held by a
// communicator attribute.
struct Record {
  MPI_Comm comm = MPI_COMM_NULL;
  bool served = false;  // an intracommunicator of more than one process
  int rank = 0;
  int size = 1;
  int nodes = 1;  // counted when a decision table needs it
  int hosts = 1;  // likewise
  // Per call form and collective, the decision table's rows that fit this
  // communicator.
  std::array<std::array<std::vector<std::uint32_t>, kMpiCollectives.size()>, kCallForms.size()> table_rows;
  const std::vector<std::uint32_t>& rows(CallForm form, MpiCollective c) const {
    return table_rows[static_cast<std::size_t>(form)][static_cast<std::size_t>(c)];
  }
  std::unique_ptr<Team> team;  // made at the first served call
  // The hierarchy form and block count the deciding row names for the call
  // being decided (State::table_serves), taken by the call's start
  // (take_choice).
  CallChoice call_choice;
  // The Team's Comm, set to plan as call_choice says (none and 0: as
  // configured); call_choice is cleared, so that no later call inherits it.
  Comm& take_choice() {
    Comm& ours = team->comm(0);
    const CallChoice choice = std::exchange(call_choice, CallChoice{});
    ours.set_form(choice.form);
    ours.set_blocks(choice.blocks);
    return ours;
  }
};

struct State {
  State(const Options& o, std::optional<DecisionTable> t)
      : options(o), comm_options(make_comm_options(o)), table(std::move(t)) {
    if (table) stats.table_rows(table->rows.size(), table->source);
    const auto keeps = [&](Collective c) { return !options.collectives.algorithm(c).needs_commutative; };
    keeps_order.fill(true);
    keeps_order[index(MpiCollective::allreduce)] = keeps(Collective::allreduce);
    keeps_order[index(MpiCollective::reduce)] = keeps(Collective::reduce);
    keeps_order[index(MpiCollective::reduce_scatter_block)] = keeps(Collective::reduce_scatter);
    keeps_order[index(MpiCollective::reduce_scatter)] = keeps(Collective::reduce_scatter);
  }

  static std::size_t index(MpiCollective c) { return static_cast<std::size_t>(c); }
  bool in_bounds(std::uint64_t bytes) const {
    return bytes >= options.mpi.min_bytes && (!options.mpi.max_bytes || bytes <= *options.mpi.max_bytes);
  }
  // Whether the decision table (if any) gives a call of `bytes` per process
  // in `form` on the record's communicator to copse; the deciding row is
  // counted, and its hierarchy form and block count kept for the call
  // (Record::call_choice).
  bool table_serves(MpiCollective c, std::uint64_t bytes, Record& r, CallForm form = CallForm::blocking) {
    r.call_choice = {};
    if (!table) return true;
    const std::size_t row = table->find(r.rows(form, c), bytes);
    stats.decided(row);
    if (row == table->rows.size()) return table->fallback == Provider::copse;
    r.call_choice = {table->rows[row].hierarchy, table->rows[row].blocks};
    return table->rows[row].use == Provider::copse;
  }
  // Both, for the collectives whose bytes need the communicator's size.
  bool serves(MpiCollective c, std::uint64_t bytes, Record& r, CallForm form = CallForm::blocking) {
    return in_bounds(bytes) && table_serves(c, bytes, r, form);
  }

  const Options options;
  const CommOptions comm_options;
  const std::optional<DecisionTable> table;  // mpi.table; none: every call in bounds is served
  Mapping mapping;
  // The configured algorithm of the collective accepts non-commutative operators.
  std::array<bool, kMpiCollectives.size()> keeps_order{};
  int keyval = MPI_KEYVAL_INVALID;
  Stats stats;
  std::unique_ptr<Tracer> tracer;  // mpi.trace set: every application call is recorded

  // Bumped before a record goes (delete_record): a thread's last look-up
  // (interposer.cpp's t_last_record) is good while this is what it saw.
  std::atomic<std::uint64_t> record_generation{0};
  std::mutex mutex;              // guards the two lists below
  std::vector<Record*> records;  // every live record, for MPI_Finalize
  std::vector<std::pair<int, std::function<void()>>> finalizers;
  int next_finalizer = 0;
};

extern std::atomic<State*> g_state;

inline State* active() noexcept { return t_nested == 0 ? g_state.load(std::memory_order_acquire) : nullptr; }

// The communicator's record, made at its first call here; null when copse
// does not serve the communicator.
Record* record(State& s, MPI_Comm comm);
// The communicator's record if one was made and copse serves it; never
// makes one (making waits for every process of the communicator).
Record* served_record(State& s, MPI_Comm comm);

// The operator of a reduction copse serves; null: the MPI library's call.
const ReduceOp* reduction(State& s, MpiCollective c, int count, MPI_Datatype type, MPI_Op op);
// The bytes of `count` elements of the operator's type.
inline std::uint64_t bytes_of(std::uint64_t count, const ReduceOp& op) { return count * op.element_bytes; }
// The elements of a reduce-scatter with a count per process (`ranks`
// counts): their sum, or nothing when a count is negative (the library's
// error to report, so such a call is passed to it).
std::optional<std::uint64_t> counted_total(const int* counts, int ranks);

// What a process's part of a scatter, gather or alltoall (or allgather) is
// as bytes: its block (the bytes one process receives or contributes) and
// how its buffers lie (mpi/interposer_moving.cpp).
struct MovedLayouts {
  std::optional<Layout> block;  // one block as this process describes it
  std::optional<Layout> other;  // the other buffer's block (send for scatter and alltoall, recv for gather)
  bool fits() const { return block && other && block->bytes == other->bytes; }
  bool contiguous() const { return block && other && block->contiguous && other->contiguous; }
};

// An allgather's or alltoall's layouts: `block` the receive buffer's block,
// `other` the send buffer's (in place: `block` again).
MovedLayouts equal_blocks(const State& s, bool in_place, int send_count, MPI_Datatype send_type, int recv_count,
                          MPI_Datatype recv_type);
// A scatter's or gather's record `r` -- looked up by the caller: the
// blocking calls make it, the nonblocking ones only find one with a Team --
// when copse serves the call (null otherwise), and its layouts: `block`,
// this process's block (scatter: received, gather: contributed) as its own
// buffer describes it (`own`) -- at the root in place, as its other buffer
// does (`root_side`) -- and `other`, the root's other buffer's blocks
// (elsewhere `block` again). A nonblocking or persistent `form` takes only
// blocks without packing (such a call has no step after its last to unpack
// in), and the table's rows of its form decide it.
Record* rooted(State& s, MpiCollective c, Record* r, int root, bool in_place, int own_count, MPI_Datatype own_type,
               int root_count, MPI_Datatype root_type, CallForm form, MovedLayouts& l);

// The MPI error class of a copse error.
int error_class(ErrorKind kind);
// A served call failed: the communicator's error handler decides.
int fail(const char* call, const Record& r, const std::string& message, int error_class);

// A served call's failure (fail above), from inside a catch block: its MPI
// class from the exception's kind (mpi/interposer_requests.cpp).
int fail_current(const char* call, const Record& r);

// Before a blocking call under MPI_THREAD_MULTIPLE: the communicator's
// nonblocking and persistent calls still running, finished by polls under
// the progress lock as waits do (another thread may be testing them), so
// that the blocking call finds none left to progress without the lock
// (mpi/interposer_requests.cpp). Throws the team's failure.
void finish_outstanding(Comm& comm);

// Serves one call on the record's Team, made now if this is the first.
template <class Body>
int run(State& s, MpiCollective c, const char* call, Record& r, Body&& body) {
  s.stats.served(c);
  if (s.tracer) TraceScope::mark_served();
  Nested nested;
  try {
    if (!r.team) r.team = std::make_unique<Team>(r.comm, s.comm_options, 1);
    finish_outstanding(r.team->comm(0));
    body(r.take_choice());
    return MPI_SUCCESS;
  } catch (...) {
    return fail_current(call, r);
  }
}

}  // namespace copse::mpi::interposer
