#include "mpi/trace.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "mpi/stats.hpp"

namespace copse::mpi {

namespace {

__attribute__((tls_model("initial-exec"))) thread_local bool t_served = false;  // see t_nested (interposer.cpp)

const char* op_name(MPI_Op op) {
  if (op == MPI_OP_NULL) return "";
  const std::pair<MPI_Op, const char*> names[] = {
      {MPI_SUM, "sum"},       {MPI_PROD, "prod"},     {MPI_MIN, "min"},         {MPI_MAX, "max"},    {MPI_BAND, "band"},
      {MPI_BOR, "bor"},       {MPI_BXOR, "bxor"},     {MPI_LAND, "land"},       {MPI_LOR, "lor"},    {MPI_LXOR, "lxor"},
      {MPI_MAXLOC, "maxloc"}, {MPI_MINLOC, "minloc"}, {MPI_REPLACE, "replace"}, {MPI_NO_OP, "no_op"}};
  for (const auto& [handle, name] : names)
    if (handle == op) return name;
  return "user";
}

// "name+0xOFFSET" for a return address: the object's file name without its
// directory, and the offset from the object's load address (stable across
// processes and runs of one binary, whatever address-space randomisation did).
std::string site_text(void* address) {
  Dl_info info{};
  if (!address || dladdr(address, &info) == 0 || !info.dli_fname) return "?";
  const char* name = std::strrchr(info.dli_fname, '/');
  name = name ? name + 1 : info.dli_fname;
  if (!*name) name = "?";  // the main program, on systems that leave its name empty
  char offset[32];
  std::snprintf(offset, sizeof offset, "+0x%" PRIxPTR,
                reinterpret_cast<std::uintptr_t>(address) - reinterpret_cast<std::uintptr_t>(info.dli_fbase));
  return std::string(name) + offset;
}

// Seconds, to the nanosecond.
std::string seconds(Tracer::Clock::duration d) {
  char text[40];
  std::snprintf(text, sizeof text, "%.9f", std::chrono::duration<double>(d).count());
  return text;
}

constexpr std::size_t kFlushBytes = std::size_t{1} << 18;  // per process, before it writes

}  // namespace

Tracer::Tracer(std::string path) : path_(std::move(path)) {
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  PMPI_Comm_size(MPI_COMM_WORLD, &size_);
  caller();  // backtrace() loads its unwinder on first use: not inside the first traced call
  int ok = 1;
  if (rank_ == 0) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      ok = 0;
    else
      ::close(fd);
  }
  PMPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) throw SystemError("cannot create the trace file " + path_ + " (mpi.trace)");
  PMPI_Barrier(MPI_COMM_WORLD);
  start_ = last_exit_ = Clock::now();
}

Tracer::~Tracer() {
  try {
    flush();
  } catch (...) {
  }
}

void* Tracer::caller() {
  void* frames[24];
  const int n = backtrace(frames, 24);
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&Tracer::caller), &self) == 0) return nullptr;
  for (int i = 1; i < n; ++i) {
    Dl_info info{};
    if (dladdr(frames[i], &info) != 0 && info.dli_fbase != self.dli_fbase)
      return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(frames[i]) - 1);  // inside the call instruction
  }
  return nullptr;
}

std::string Tracer::line(const Call& c, bool served, Clock::time_point exit) {
  int comm_size = 0, comm_rank = 0, type_size = 0;
  if (c.comm != MPI_COMM_NULL) {
    PMPI_Comm_size(c.comm, &comm_size);
    PMPI_Comm_rank(c.comm, &comm_rank);
  }
  if (c.type != MPI_DATATYPE_NULL) PMPI_Type_size(c.type, &type_size);
  std::string out =
      "{\"rank\": " + std::to_string(rank_) + ", \"size\": " + std::to_string(size_) +
      ", \"call\": " + std::to_string(calls_) + ", \"collective\": \"" + std::string(to_string(c.collective)) +
      "\", \"comm_size\": " + std::to_string(comm_size) + ", \"comm_rank\": " + std::to_string(comm_rank) +
      ", \"count\": " + std::to_string(c.count) + ", \"type_size\": " + std::to_string(type_size) + ", \"op\": \"" +
      op_name(c.op) + "\", \"root\": " + std::to_string(c.root) + ", \"served\": " + (served ? "true" : "false") +
      ", \"site\": \"" + site_text(c.site) + "\", \"t\": " + seconds(c.enter - start_) +
      ", \"gap\": " + seconds(c.enter - last_exit_) + ", \"duration\": " + seconds(exit - c.enter) + "}\n";
  return out;
}

void Tracer::record(const Call& call, bool served) {
  const Clock::time_point exit = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  // Calls from several threads may overlap; a gap is never negative.
  if (call.enter < last_exit_) last_exit_ = call.enter;
  buffer_ += line(call, served, exit);
  last_exit_ = exit;
  ++calls_;
  if (buffer_.size() >= kFlushBytes) {
    std::string chunk;
    chunk.swap(buffer_);
    append_line(path_, chunk, "trace file");
  }
}

void Tracer::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffer_.empty()) return;
  std::string chunk;
  chunk.swap(buffer_);
  append_line(path_, chunk, "trace file");
}

TraceScope::TraceScope(Tracer* tracer, MpiCollective c, MPI_Comm comm, long long count, MPI_Datatype type, MPI_Op op,
                       int root)
    : tracer_(tracer) {
  if (!tracer_) return;
  outer_served_ = t_served;
  call_.collective = c;
  call_.comm = comm;
  call_.count = count;
  call_.type = type;
  call_.op = op;
  call_.root = root;
  call_.site = Tracer::caller();
  t_served = false;
  call_.enter = Tracer::Clock::now();
}

TraceScope::~TraceScope() {
  if (!tracer_) return;
  const bool served = t_served;
  t_served = outer_served_;
  try {
    tracer_->record(call_, served);
  } catch (...) {
    // A full disk must not fail the application's call; the lost lines show
    // as a gap in the call numbers.
  }
}

void TraceScope::mark_served() noexcept { t_served = true; }

long long total_count(const int* counts, MPI_Comm comm) {
  int size = 0;
  if (!counts || comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return 0;
  long long total = 0;
  for (int r = 0; r < size; ++r) total += counts[r] > 0 ? counts[r] : 0;
  return total;
}

}  // namespace copse::mpi
