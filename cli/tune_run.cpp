#include "cli/tune_run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/cores.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

namespace {

namespace fs = std::filesystem;

// The first of `candidates` that exists, or "".
std::string first_existing(const std::vector<fs::path>& candidates) {
  for (const fs::path& p : candidates) {
    std::error_code error;
    if (fs::is_regular_file(p, error)) return p.lexically_normal().string();
  }
  return "";
}

// `name` as execvp would find it: itself when it has a slash, else on PATH.
bool on_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  for (const std::string& dir : split(path ? path : "", ':'))
    if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0) return true;
  return false;
}

// Runs `argv` with stdout and stderr appended to `log`, in a process group
// of its own, so that a run past `timeout_seconds` is stopped whole (mpirun
// and what it started): TERM, then KILL ten seconds later. Its exit status;
// 124 after a timeout (as timeout(1) says it), 127 when it cannot start.
int run_logged(const std::vector<std::string>& argv, const std::string& log, int timeout_seconds) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int out = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (out < 0) throw SystemError("cannot open the log " + log + ": " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out);
    throw SystemError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, STDIN_FILENO);
    ::execvp(args[0], args.data());
    const char* why = std::strerror(errno);
    (void)!::write(STDERR_FILENO, "copse tune: cannot run ", 23);
    (void)!::write(STDERR_FILENO, args[0], std::strlen(args[0]));
    (void)!::write(STDERR_FILENO, ": ", 2);
    (void)!::write(STDERR_FILENO, why, std::strlen(why));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::close(out);
  ::setpgid(pid, pid);  // also from here: no race with the first kill
  const auto start = std::chrono::steady_clock::now();
  bool timed_out = false;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) throw SystemError(std::string("waitpid: ") + std::strerror(errno));
    const auto waited = std::chrono::steady_clock::now() - start;
    if (!timed_out && waited > std::chrono::seconds(timeout_seconds)) {
      timed_out = true;
      ::kill(-pid, SIGTERM);
    } else if (timed_out && waited > std::chrono::seconds(timeout_seconds + 10)) {
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (timed_out) return 124;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Where copse's side of `shape` counts the calls it served and passed.
std::string stats_file(const std::string& raw, const TuneShape& shape) {
  return (fs::path(raw).parent_path() / ("stats-" + shape.name + ".jsonl")).string();
}

// One side of the rotation: the library alone, or copse (as configured, or
// in a variant: another hierarchy form, a fixed block count).
struct Side {
  bool copse = false;
  std::optional<TuneVariant> variant;
  std::string label() const { return !copse ? "tuned" : variant ? variant->label() : "copse"; }
};

std::vector<Side> sides_of(const TuneMeasurement& m, const TuneShape& shape) {
  std::vector<Side> sides = {{false, std::nullopt}, {true, std::nullopt}};
  if (m.paired) sides.erase(sides.begin());  // the library's calls are timed within copse's runs
  if (!shape.multi_node()) return sides;
  for (Form form : m.hierarchy_forms) sides.push_back({true, TuneVariant{form, 0}});
  if (measures_block_counts(m))
    for (int blocks : m.block_counts) sides.push_back({true, TuneVariant{std::nullopt, blocks}});
  return sides;
}

// One side's run of one shape: the launcher's command line.
std::vector<std::string> side_command(const TunePrograms& p, const TuneMeasurement& m, const TuneShape& shape,
                                      const Side& side, const std::string& raw) {
  const bool copse = side.copse;
  std::vector<std::string> argv = p.mpirun;
  argv.insert(argv.end(), {"-np", std::to_string(shape.ranks)});
  argv.insert(argv.end(), m.launcher_args.begin(), m.launcher_args.end());
  if (shape.hosts == 1) {
    // One host: shared memory only; more ranks than cores share them and yield.
    argv.insert(argv.end(), {"--mca", "btl", "self,vader"});
    if (shape.ranks > cpu_count(process_cpus()))
      argv.insert(argv.end(), {"--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"});
  }
  if (copse) {
    argv.insert(argv.end(), {"-x", "LD_PRELOAD=" + p.library, "-x", "COPSE_MPI_TABLE=none", "-x",
                             "COPSE_MPI_STATS=" + stats_file(raw, shape)});
    if (shape.ranks_per_node)
      argv.insert(argv.end(), {"-x", "COPSE_HIERARCHY_RANKS_PER_NODE=" + std::to_string(shape.ranks_per_node)});
    if (side.variant && side.variant->form)
      argv.insert(argv.end(), {"-x", "COPSE_HIERARCHY_FORM=" + std::string(to_string(*side.variant->form))});
    if (side.variant && side.variant->blocks)
      argv.insert(argv.end(), {"-x", "COPSE_COLLECTIVES_BLOCKS=" + std::to_string(side.variant->blocks)});
  }
  argv.insert(argv.end(), {p.bench, "--label", side.label(), "--config", shape.name, "--json", raw});
  if (m.paired) argv.insert(argv.end(), {"--native", Side{}.label()});
  if (!m.sizes.empty()) argv.insert(argv.end(), {"--sizes", m.sizes});
  if (!m.collectives.empty()) argv.insert(argv.end(), {"--collectives", m.collectives});
  if (!m.forms.empty()) argv.insert(argv.end(), {"--forms", m.forms});
  if (!m.sync.empty()) argv.insert(argv.end(), {"--sync", m.sync});
  // A block count matters where a vector has room for blocks: the smaller
  // sizes, and barrier, are left out.
  if (side.variant && side.variant->blocks && m.block_counts_from)
    argv.insert(argv.end(), {"--min-size", std::to_string(m.block_counts_from)});
  return argv;
}

}  // namespace

bool measures_block_counts(const TuneMeasurement& m) {
  if (m.block_counts.empty()) return false;
  if (m.sizes.empty()) return true;  // the benchmark's sweep, up to 64 MiB
  for (const std::string& bytes : split(m.sizes, ','))
    if (!bytes.empty() && std::stoull(bytes) >= m.block_counts_from) return true;
  return false;
}

TunePrograms locate_tune_programs(const std::string& self, const std::string& mpirun, const std::string& bench,
                                  const std::string& library, const TuneInstallDirs& installed) {
  const fs::path dir = fs::path(self).parent_path(), prefix = dir / "..";
  TunePrograms p;
  for (const std::string& word : split(mpirun, ' '))
    if (!word.empty()) p.mpirun.push_back(word);
  if (p.mpirun.empty() || !on_path(p.mpirun.front()))
    throw UsageError("cannot find the launcher '" + mpirun +
                     "' (an MPI's mpirun on PATH, or name it with --mpirun COMMAND)");
  p.bench =
      bench.empty() ? first_existing({dir / "mpi_collectives", prefix / installed.libexec / "mpi_collectives"}) : bench;
  if (p.bench.empty() || ::access(p.bench.c_str(), X_OK) != 0)
    throw UsageError("cannot find the benchmark mpi_collectives " +
                     (bench.empty() ? "beside " + self + " or in PREFIX/" + installed.libexec : "at " + bench) +
                     " (CMake builds it with libcopse_mpi.so when it finds MPI; or name it with --bench FILE)");
  p.library =
      library.empty() ? first_existing({dir / "libcopse_mpi.so", prefix / installed.lib / "libcopse_mpi.so"}) : library;
  if (p.library.empty() || !fs::is_regular_file(p.library))
    throw UsageError("cannot find libcopse_mpi.so " +
                     (library.empty() ? "beside " + self + " or in PREFIX/" + installed.lib : "at " + library) +
                     " (CMake builds it when it finds MPI; or name it with --library FILE)");
  // mpirun hands the preload to processes that may start elsewhere: absolute paths.
  p.bench = fs::absolute(p.bench).string();
  p.library = fs::absolute(p.library).string();
  return p;
}

std::string measure_for_tune(const TunePrograms& programs, const TuneMeasurement& m,
                             const std::function<void(const std::string&)>& say) {
  std::error_code error;
  fs::create_directories(m.work, error);
  if (error) throw SystemError("cannot make the directory " + m.work + ": " + error.message());
  const std::string work = fs::absolute(m.work).string();  // rank 0 writes raw.jsonl from its own directory
  const std::string raw = work + "/raw.jsonl", log = work + "/runs.log", csv = work + "/pooled.csv";
  for (const std::string& file : {raw, log, work + "/report.txt"}) std::ofstream(file, std::ios::trunc);
  for (const TuneShape& shape : m.shapes) fs::remove(stats_file(raw, shape), error);
  if (::getuid() == 0) {  // Open MPI refuses root unless told
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  for (const TuneShape& shape : m.shapes) {
    const std::vector<Side> sides = sides_of(m, shape);
    for (int round = 0; round < m.rounds; ++round)
      for (std::size_t k = 0; k < sides.size(); ++k) {
        // Rotated: tuned first in round 1, copse first in round 2, ...
        const Side& side = sides[(k + static_cast<std::size_t>(round)) % sides.size()];
        const std::string name = shape.name + " " + side.label();
        const std::vector<std::string> argv = side_command(programs, m, shape, side, raw);
        std::ofstream(log, std::ios::app) << "== " << name << " round " << round + 1 << ": " << join(argv, " ") << "\n";
        const auto results_before = fs::exists(raw) ? fs::file_size(raw) : 0;
        const auto start = std::chrono::steady_clock::now();
        const int status = run_logged(argv, log, m.timeout_seconds);
        const auto seconds =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start).count();
        say("  " + name + " round " + std::to_string(round + 1) + ": " + std::to_string(seconds) + " s" +
            (status == 0 ? "" : ", exit status " + std::to_string(status)));
        if (status == 124)
          throw RunFailure(name + " timed out after " + std::to_string(m.timeout_seconds) + " s (see " + log + ")");
        if (status != 0)
          throw RunFailure(name + " failed with exit status " + std::to_string(status) + " (see " + log + ")");
        if (fs::file_size(raw) == results_before)
          throw RunFailure(name + " wrote no results to " + raw +
                           " (did the launcher run the program? rank 0 must see that folder; see " + log + ")");
      }
  }
  // The report says how many calls copse served and passed on: ratios of
  // calls it passed compare the library with itself.
  std::vector<std::string> report = {programs.bench, "--report", raw, "--csv", csv, "--stats"};
  for (const TuneShape& shape : m.shapes) report.push_back(stats_file(raw, shape));
  const int status = run_logged(report, work + "/report.txt", 300);
  if (status != 0)
    throw RunFailure("the benchmark's report of " + raw + " failed (exit status " + std::to_string(status) + ", see " +
                     work + "/report.txt): a wrong result, or no results");
  return csv;
}

}  // namespace copse
