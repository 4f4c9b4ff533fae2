#include "mpi/interposer.hpp"

#include <dlfcn.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.hpp"
#include "common/error.hpp"
#include "config/decision_table.hpp"
#include "mpi/datatype_layout.hpp"
#include "mpi/interposer_state.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi::interposer {

__attribute__((tls_model("initial-exec"))) thread_local int t_nested = 0;  // interposer_state.hpp
std::atomic<State*> g_state{nullptr};

namespace {

// One line on stderr in one write(2), so that processes do not interleave.
void say(const std::string& text) {
  const std::string line = "copse: " + text + "\n";
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
}

// ---------------------------------------------------------------- set-up

// FNV-1a over every key's value but mpi.stats (a per-process file name is
// harmless); the processes' settings must agree for their decisions to.
std::uint64_t fingerprint(const Config& config) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const ConfigKey& key : config_keys()) {
    if (key.name == "mpi.stats") continue;
    for (char ch : std::string(key.name) + '=' + config.value_text(key.name) + '\n') {
      hash ^= static_cast<unsigned char>(ch);
      hash *= 1099511628211ULL;
    }
  }
  return hash;
}

// The process chosen prints the reason once and aborts the job; the others
// wait in a barrier it never joins until MPI_Abort ends them (aborting as well
// could end the job before the reason is printed).
[[noreturn]] void abort_job(bool speaker, const std::string& reason) {
  if (speaker) {
    say(reason + " (libcopse_mpi.so stops the job)");
    PMPI_Abort(MPI_COMM_WORLD, 2);
  }
  PMPI_Barrier(MPI_COMM_WORLD);
  PMPI_Abort(MPI_COMM_WORLD, 2);
  std::abort();
}

int delete_record(MPI_Comm, int, void* value, void*) {
  auto* record = static_cast<Record*>(value);
  Nested nested;
  if (State* s = g_state.load()) {
    s->record_generation.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> lock(s->mutex);
    std::erase(s->records, record);
  }
  // A Team still here belongs to a communicator freed other than by
  // MPI_Comm_free (MPI_Comm_disconnect): it goes with the record.
  try {
    delete record;
  } catch (...) {
  }
  return MPI_SUCCESS;
}

// glibc's malloc serves blocks from 128 KiB up by mmap and gives the heap's
// free top back to the kernel beyond 128 KiB, raising both thresholds as
// the process frees larger mmapped blocks (up to 32 and 64 MiB). Which
// frees come first depends on everything the process has allocated: with
// copse's own allocations in a process, an MPI library's reduce of 512 KiB
// at np 4 freed its two temporary buffers onto the heap's top every call,
// beyond the threshold its first call had set, and the heap shrank and grew
// by 1 MiB a call -- 128 page faults per call on the roots, where the same
// program without copse kept them (a deferred MPI_Reduce of 512 KiB, np 4 on
// 2 cores: 300-313 against 107-132 us; with the thresholds below, 101-112).
// Fixed at the ceiling the dynamic thresholds reach anyway, that depends on
// nothing: blocks up to 32 MiB come from the heap, and up to 64 MiB of freed
// top stays mapped (mpi.keep_heap = false leaves malloc alone).
void keep_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

// After PMPI_Init or PMPI_Init_thread succeeded, on every process of
// MPI_COMM_WORLD.
void start() {
  Nested nested;
  std::optional<Config> config;
  std::optional<DecisionTable> table;
  std::string error;
  try {
    config = Config::load();
    make_comm_options(config->options()).check();  // algorithms the form cannot run, before any call
    table = configured_decision_table(config->options().mpi);
  } catch (const std::exception& e) {
    error = e.what();
  }
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One allreduce answers both questions: the lowest rank whose
  // configuration failed, and whether all fingerprints are equal (the
  // minimum of the fingerprint and of its complement).
  const std::uint64_t print = config ? fingerprint(*config) : 0;
  std::uint64_t mine[3] = {error.empty() ? UINT64_MAX : static_cast<std::uint64_t>(rank), print, ~print};
  std::uint64_t all[3] = {};
  check_mpi(PMPI_Allreduce(mine, all, 3, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (all[0] != UINT64_MAX) abort_job(all[0] == static_cast<std::uint64_t>(rank), error);
  if (all[1] != ~all[2])
    abort_job(rank == 0,
              "the processes' configurations differ (COPSE_* variables or copse.toml; `copse config` shows one); "
              "every process must see the same settings, or they would not serve the same calls");

  if (config->options().mpi.keep_heap) keep_heap();
  auto state = std::make_unique<State>(config->options(), std::move(table));
  check_mpi(PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_record, &state->keyval, nullptr),
            "MPI_Comm_create_keyval");
  find_fortran_constants();  // bindings_fortran.cpp
  if (!state->options.mpi.trace.empty()) state->tracer = std::make_unique<Tracer>(state->options.mpi.trace);
  g_state.store(state.release(), std::memory_order_release);
}

// Ends a record's Team (if it has one), counting its cross-memory attach in the stats.
void end_team(State& s, Record& r) {
  if (!r.team) return;
  finish_outstanding(r.team->comm(0));  // under MPI_THREAD_MULTIPLE another thread may be testing them
  r.team->comm(0).wait_outstanding();   // its nonblocking calls still running (mpi/interposer_nonblocking.cpp)
  s.stats.team_done(r.team->cross_memory_attach(), r.team->cross_memory_attach_note(), r.team->attached_bytes());
  r.team.reset();
}

// Before PMPI_Finalize: every Team, then the records, the keyval, the stats.
void stop(State& s) {
  Nested nested;
  std::vector<std::pair<int, std::function<void()>>> finalizers;
  std::vector<Record*> records;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    finalizers.swap(s.finalizers);
    records = s.records;
  }
  for (auto& f : finalizers) f.second();
  // The Teams first, outside any attribute callback (see comm_free).
  for (Record* r : records) {
    try {
      end_team(s, *r);
    } catch (...) {
    }
  }
  for (Record* r : records) PMPI_Comm_delete_attr(r->comm, s.keyval);  // delete_record frees each
  PMPI_Comm_free_keyval(&s.keyval);
  if (!s.options.mpi.stats.empty()) {
    int rank = 0, size = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    try {
      append_line(s.options.mpi.stats, s.stats.json_line(rank, size));
    } catch (const std::exception& e) {
      say(e.what());  // the program's own results are fine: say so, do not fail it
    }
  }
  if (s.tracer) {
    try {
      s.tracer->flush();
    } catch (const std::exception& e) {
      say(e.what());
    }
  }
  g_state.store(nullptr, std::memory_order_release);
  delete &s;
}

// ---------------------------------------------------------------- serving

// The hosts of a communicator -- its shared-memory islands (one split and
// one allreduce, once per communicator, at the first call every process
// makes alike) -- and its nodes as its Team will see them: the virtual nodes
// of hierarchy.ranks_per_node, or the hosts. Failures count as one host (a
// row's shape then may not fit; the call is still right whoever serves it).
void count_hosts_and_nodes(const State& s, MPI_Comm comm, Record& r) {
  MPI_Comm island = MPI_COMM_NULL;
  int local = 0, leader = 0;
  r.hosts = 1;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &island) == MPI_SUCCESS) {
    PMPI_Comm_rank(island, &local);
    PMPI_Comm_free(&island);
    leader = local == 0 ? 1 : 0;
    if (PMPI_Allreduce(&leader, &r.hosts, 1, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS) r.hosts = 1;
  }
  const int k = s.options.hierarchy.ranks_per_node;
  r.nodes = k > 0 ? (r.size + k - 1) / k : r.hosts;
}

// This thread's last record found, while no record has gone since
// (State::record_generation): an application calls on one communicator
// after another, and the attribute look-up it spares is about a third of
// an interposed 8-byte bcast's own instructions.
struct LastRecord {
  MPI_Comm comm = MPI_COMM_NULL;
  Record* record = nullptr;
  std::uint64_t generation = 0;
};
__attribute__((tls_model("initial-exec"))) thread_local LastRecord t_last_record;

// The record the communicator's attribute holds, through this thread's last
// look-up; null when it holds none yet, or (`looked` false) when the
// look-up failed or copse never looks (MPI_COMM_NULL; MPI_COMM_SELF, one
// process: without an attribute look-up).
Record* attached_record(State& s, MPI_Comm comm, bool& looked) {
  looked = comm != MPI_COMM_NULL && comm != MPI_COMM_SELF;
  if (!looked) return nullptr;
  const std::uint64_t generation = s.record_generation.load(std::memory_order_acquire);
  LastRecord& last = t_last_record;
  if (last.comm == comm && last.generation == generation && last.record) return last.record;
  void* value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, s.keyval, &value, &found) != MPI_SUCCESS) {
    looked = false;
    return nullptr;
  }
  if (!found) return nullptr;
  auto* r = static_cast<Record*>(value);
  last = LastRecord{comm, r, generation};
  return r;
}

}  // namespace

// The operator of a reduction copse serves; null: the MPI library's call.
const ReduceOp* reduction(State& s, MpiCollective c, int count, MPI_Datatype type, MPI_Op op) {
  if (!s.options.mpi.serves(c) || count < 0) return nullptr;
  const ServedType* t = s.mapping.type(type);
  if (!t) return nullptr;
  const ReduceOp* reduce_op = s.mapping.op(op, *t);
  if (!reduce_op || (!reduce_op->commutative && !s.keeps_order[State::index(c)])) return nullptr;
  return reduce_op;
}

Record* served_record(State& s, MPI_Comm comm) {
  bool looked = true;
  Record* r = attached_record(s, comm, looked);
  return r && r->served ? r : nullptr;
}

// The communicator's record, made at its first call here; null when copse
// does not serve the communicator.
Record* record(State& s, MPI_Comm comm) {
  bool looked = true;
  if (Record* r = attached_record(s, comm, looked)) return r->served ? r : nullptr;
  if (!looked) return nullptr;
  auto r = std::make_unique<Record>();
  r->comm = comm;
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || PMPI_Comm_rank(comm, &r->rank) != MPI_SUCCESS ||
      PMPI_Comm_size(comm, &r->size) != MPI_SUCCESS)
    return nullptr;
  // One process: nothing to gain, and a Team would cost a shared segment.
  r->served = inter == 0 && r->size > 1;
  if (r->served && s.table) {
    count_hosts_and_nodes(s, comm, *r);
    for (CallForm form : kCallForms)
      for (MpiCollective c : kMpiCollectives)
        r->table_rows[static_cast<std::size_t>(form)][State::index(c)] =
            s.table->rows_for(c, form, r->size, r->nodes, r->hosts);
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.records.push_back(r.get());
  }
  if (PMPI_Comm_set_attr(comm, s.keyval, r.get()) != MPI_SUCCESS) {
    std::lock_guard<std::mutex> lock(s.mutex);
    std::erase(s.records, r.get());
    return nullptr;
  }
  Record* out = r.release();
  return out->served ? out : nullptr;
}

int error_class(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage: return MPI_ERR_ARG;
    case ErrorKind::schedule: return MPI_ERR_TRUNCATE;
    case ErrorKind::timeout:
    case ErrorKind::aborted:
    case ErrorKind::failed:
    case ErrorKind::system: break;
  }
  return MPI_ERR_OTHER;
}

int fail(const char* call, const Record& r, const std::string& message, int error_class) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  const bool known = PMPI_Comm_get_errhandler(r.comm, &handler) == MPI_SUCCESS;
  if (!known || handler == MPI_ERRORS_ARE_FATAL) {
    say(std::string(call) + " failed on rank " + std::to_string(r.rank) + " of its communicator: " + message);
    PMPI_Abort(r.comm, error_class);
  }
  PMPI_Errhandler_free(&handler);
  PMPI_Comm_call_errhandler(r.comm, error_class);  // MPI_ERRORS_RETURN: nothing; a user handler: called
  return error_class;
}

Nested::Nested() { ++t_nested; }
Nested::~Nested() { --t_nested; }

// ---------------------------------------------------------------- hooks

namespace {
// After a successful PMPI_Init or PMPI_Init_thread. Nothing may escape into
// the application's MPI_Init: a failure to set up stops the job, like a
// configuration error.
int started(int rc) {
  if (rc != MPI_SUCCESS) return rc;
  try {
    start();
    make_world_team();  // mpi/interposer_nonblocking.cpp
  } catch (const std::exception& e) {
    say(std::string("cannot start: ") + e.what() + " (libcopse_mpi.so stops the job)");
    PMPI_Abort(MPI_COMM_WORLD, 2);
  }
  return rc;
}
}  // namespace

int init(int* argc, char*** argv) { return started(PMPI_Init(argc, argv)); }

int init_thread(int* argc, char*** argv, int required, int* provided) {
  return started(PMPI_Init_thread(argc, argv, required, provided));
}

int finalize() {
  if (State* s = active()) stop(*s);
  return PMPI_Finalize();
}

int comm_free(MPI_Comm* comm) {
  // Destroy the Team here rather than in delete_record, which MPI calls with
  // its attribute machinery in the middle of freeing the communicator: the
  // Team frees a communicator of its own, and that is best done outside.
  if (State* s = active(); s && comm && *comm != MPI_COMM_NULL) {
    Nested nested;
    void* value = nullptr;
    int found = 0;
    if (PMPI_Comm_get_attr(*comm, s->keyval, &value, &found) == MPI_SUCCESS && found) {
      try {
        end_team(*s, *static_cast<Record*>(value));
      } catch (...) {
      }
    }
  }
  return PMPI_Comm_free(comm);
}

int op_free(MPI_Op* op) {
  if (State* s = active(); s && op) s->mapping.forget(*op);
  return PMPI_Op_free(op);
}

// ---------------------------------------------------------------- collectives

int allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::allreduce;
  State* s = active();
  if (!s) return PMPI_Allreduce(send, recv, count, type, op, comm);
  const TraceScope trace(s->tracer.get(), c, comm, count, type, op, -1);
  if (recv != MPI_IN_PLACE)
    if (const auto reduce_op = reduction(*s, c, count, type, op);
        reduce_op && s->in_bounds(bytes_of(count, *reduce_op)))
      if (Record* r = record(*s, comm); r && s->table_serves(c, bytes_of(count, *reduce_op), *r))
        return run(*s, c, "MPI_Allreduce", *r, [&](Comm& cc) {
          cc.allreduce(send == MPI_IN_PLACE ? recv : send, recv, static_cast<std::size_t>(count), *reduce_op);
        });
  s->stats.passed(c);
  return PMPI_Allreduce(send, recv, count, type, op, comm);
}

int reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::reduce;
  State* s = active();
  if (!s) return PMPI_Reduce(send, recv, count, type, op, root, comm);
  const TraceScope trace(s->tracer.get(), c, comm, count, type, op, root);
  if (const auto reduce_op = reduction(*s, c, count, type, op); reduce_op && s->in_bounds(bytes_of(count, *reduce_op)))
    if (Record* r = record(*s, comm))
      // MPI_IN_PLACE is the root's only, as send buffer.
      if (root >= 0 && root < r->size && (r->rank == root ? recv != MPI_IN_PLACE : send != MPI_IN_PLACE) &&
          s->table_serves(c, bytes_of(count, *reduce_op), *r))
        return run(*s, c, "MPI_Reduce", *r, [&](Comm& cc) {
          const bool at_root = r->rank == root;  // elsewhere recv is insignificant, maybe null
          cc.reduce(send == MPI_IN_PLACE ? recv : send, at_root ? recv : nullptr, static_cast<std::size_t>(count),
                    *reduce_op, root);
        });
  s->stats.passed(c);
  return PMPI_Reduce(send, recv, count, type, op, root, comm);
}

int barrier(MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::barrier;
  State* s = active();
  if (!s) return PMPI_Barrier(comm);
  const TraceScope trace(s->tracer.get(), c, comm, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, -1);
  if (s->options.mpi.serves(c))
    if (Record* r = record(*s, comm); r && s->table_serves(c, 0, *r))
      return run(*s, c, "MPI_Barrier", *r, [](Comm& cc) { cc.barrier(); });
  s->stats.passed(c);
  return PMPI_Barrier(comm);
}

int reduce_scatter_block(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::reduce_scatter_block;
  State* s = active();
  if (!s) return PMPI_Reduce_scatter_block(send, recv, count, type, op, comm);
  const TraceScope trace(s->tracer.get(), c, comm, count, type, op, -1);
  if (recv != MPI_IN_PLACE)
    if (const auto reduce_op = reduction(*s, c, count, type, op))
      if (Record* r = record(*s, comm);
          r &&
          s->serves(c, bytes_of(static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(r->size), *reduce_op),
                    *r))
        return run(*s, c, "MPI_Reduce_scatter_block", *r, [&](Comm& cc) {
          cc.reduce_scatter_block(send == MPI_IN_PLACE ? recv : send, recv, static_cast<std::size_t>(count),
                                  *reduce_op);
        });
  s->stats.passed(c);
  return PMPI_Reduce_scatter_block(send, recv, count, type, op, comm);
}

int reduce_scatter(const void* send, void* recv, const int* counts, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  constexpr MpiCollective c = MpiCollective::reduce_scatter;
  State* s = active();
  if (!s) return PMPI_Reduce_scatter(send, recv, counts, type, op, comm);
  const TraceScope trace(s->tracer.get(), c, comm, s->tracer ? total_count(counts, comm) : 0, type, op, -1);
  if (recv != MPI_IN_PLACE && counts)
    if (const auto reduce_op = reduction(*s, c, 0, type, op))
      if (Record* r = record(*s, comm)) {
        const auto total = counted_total(counts, r->size);
        if (total && s->serves(c, bytes_of(*total, *reduce_op), *r))
          return run(*s, c, "MPI_Reduce_scatter", *r, [&](Comm& cc) {
            cc.reduce_scatter(send == MPI_IN_PLACE ? recv : send, recv, counts, *reduce_op);
          });
      }
  s->stats.passed(c);
  return PMPI_Reduce_scatter(send, recv, counts, type, op, comm);
}

// ---------------------------------------------------------------- the rest

std::optional<std::uint64_t> counted_total(const int* counts, int ranks) {
  std::uint64_t total = 0;
  for (const int* n = counts; n != counts + ranks; ++n) {
    if (*n < 0) return std::nullopt;
    total += static_cast<std::uint64_t>(*n);
  }
  return total;
}

Mapping* mapping() {
  State* s = g_state.load(std::memory_order_acquire);
  return s ? &s->mapping : nullptr;
}

const CommOptions* comm_options() {
  State* s = g_state.load(std::memory_order_acquire);
  return s ? &s->comm_options : nullptr;
}

int at_finalize(std::function<void()> teardown) {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return -1;
  std::lock_guard<std::mutex> lock(s->mutex);
  s->finalizers.emplace_back(s->next_finalizer, std::move(teardown));
  return s->next_finalizer++;
}

void forget_at_finalize(int id) {
  State* s = g_state.load(std::memory_order_acquire);
  if (!s) return;
  std::lock_guard<std::mutex> lock(s->mutex);
  std::erase_if(s->finalizers, [id](const auto& f) { return f.first == id; });
}

}  // namespace copse::mpi::interposer
