#pragma once
// What the interposition library did with each collective call: served by
// copse, or passed to the MPI library. At MPI_Finalize every process appends
// one line to the stats file (mpi.stats, COPSE_MPI_STATS):
//   {"rank": 0, "size": 4, "served": {"allreduce": 12, ...}, "passed": {"allreduce": 1, ...},
//    "cma": {"teams": 1, "off": 0, "bytes": 123456, "note": ""},
//    "table": {"source": "built-in", "rows": [3, 0, 12], "unmatched": 1}}
// with every collective of config.hpp's MpiCollective in both objects, the
// calls each row of the decision table decided (mpi.table, `source` its file
// or "built-in"; `rows` in the table's order, `unmatched` those no row
// matched; absent without a table: `copse config --stats FILE` shows the
// counts beside the rows),
// the nonblocking calls (MPI_Iallreduce, ...) and the persistent ones
// (MPIX_Allreduce_init, ...) under "nonblocking" and "persistent", each
// {"served": {...}, "passed": {...}} named by their blocking collective,
// and cross-memory attach (mpi.cma) over the process's Teams: how many read
// large messages from their node peers' memory (some for allgathers alone),
// how many did not (`note`: why not, or why allgathers alone, for the
// first such Team), and the bytes this process read that way.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace copse::mpi {

class Stats {
 public:
  // Counted from any thread; relaxed atomics, so passing a call through
  // costs one uncontended increment.
  void served(MpiCollective c) noexcept { served_[index(c)].fetch_add(1, std::memory_order_relaxed); }
  void passed(MpiCollective c) noexcept { passed_[index(c)].fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t served_count(MpiCollective c) const noexcept { return served_[index(c)].load(); }
  std::uint64_t passed_count(MpiCollective c) const noexcept { return passed_[index(c)].load(); }
  // A nonblocking (`persistent` false) or persistent call, served or passed.
  void served(MpiCollective c, bool persistent) noexcept {
    (persistent ? persistent_ : nonblocking_)[0][index(c)].fetch_add(1, std::memory_order_relaxed);
  }
  void passed(MpiCollective c, bool persistent) noexcept {
    (persistent ? persistent_ : nonblocking_)[1][index(c)].fetch_add(1, std::memory_order_relaxed);
  }
  // The decision table's rows (set once, before any call): decided(i)
  // counts a call row i decided, decided(rows) one no row matched.
  void table_rows(std::size_t rows, std::string source) {
    decided_ = std::vector<std::atomic<std::uint64_t>>(rows + 1);
    table_source_ = std::move(source);
  }
  void decided(std::size_t row) noexcept {
    if (row < decided_.size()) decided_[row].fetch_add(1, std::memory_order_relaxed);
  }
  // A Team ends: whether it used cross-memory attach, why not, the bytes it read so.
  void team_done(bool cma, const std::string& note, std::uint64_t attached_bytes);

  // The stats file's line for this process (rank in MPI_COMM_WORLD, its
  // size), newline included.
  std::string json_line(int rank, int size) const;

 private:
  static std::size_t index(MpiCollective c) noexcept { return static_cast<std::size_t>(c); }
  std::array<std::atomic<std::uint64_t>, kMpiCollectives.size()> served_{};
  std::array<std::atomic<std::uint64_t>, kMpiCollectives.size()> passed_{};
  using Counts = std::array<std::atomic<std::uint64_t>, kMpiCollectives.size()>;
  Counts nonblocking_[2]{}, persistent_[2]{};        // served, passed
  std::vector<std::atomic<std::uint64_t>> decided_;  // per table row, then "no row"; empty: no table
  std::string table_source_;
  mutable std::mutex cma_mutex_;  // Teams end rarely: a lock keeps the four together
  std::uint64_t cma_teams_ = 0, cma_off_ = 0, cma_bytes_ = 0;
  std::string cma_note_;
};

// Appends `line` to the file `path` (created with mode 0644 if absent) in one
// write(2) on an O_APPEND descriptor, so that the lines of processes that
// append at the same moment never interleave. Throws SystemError naming the
// file (as `what`) and the reason. Also the trace file's writer (mpi/trace.hpp).
void append_line(const std::string& path, std::string_view line, std::string_view what = "stats file");

}  // namespace copse::mpi
