#pragma once
// The decision table (issue 18): for each MPI call the interposition library
// (mpi/) could serve, whether copse serves it or the MPI library does, by
// collective, bytes per process and communicator shape. It exists because a
// user preloads copse to gain: where copse was measured slower than the
// library, the call goes to the library.
//
// The file is TOML: an optional `default` and rows in order; the first row
// that matches a call decides it, and a call no row matches goes where
// `default` says.
//
//   default = "mpi"              # "copse" or "mpi" (the default: mpi)
//   [[row]]
//   collective = "bcast"         # allreduce, reduce, bcast, barrier, allgather,
//                                # reduce_scatter_block, reduce_scatter, scatter,
//                                # gather, alltoall, allgatherv, gatherv,
//                                # scatterv, alltoallv, or "*"
//   min_bytes = 0                # bytes each process contributes, inclusive
//   max_bytes = "128B"           #   (mpi.min_bytes' measure; SIZE or integer)
//   min_ranks = 3                # communicator size, inclusive
//   max_ranks = 8
//   min_nodes = 1                # nodes of the communicator (hierarchy.ranks_per_node's
//   max_nodes = 1                #   virtual nodes when set), inclusive
//   min_hosts = 1                # hosts of the communicator (its shared-memory islands,
//   max_hosts = 1                #   whatever the virtual nodes), inclusive: virtual nodes of
//                                #   one host and real hosts are measured apart
//   form = "nonblocking"         # "blocking" (MPI_Allreduce), "nonblocking"
//                                #   (MPI_Iallreduce) or "persistent" (MPI_Allreduce_init,
//                                #   MPIX_Allreduce_init + MPI_Start); absent: every form
//   use = "mpi"                  # "copse" or "mpi"
//   hierarchy = "lanes"          # with use = "copse": the hierarchy form copse plans
//                                #   these calls in (flat, leader, multi-leader, lanes or
//                                #   auto; hierarchy.form's names); absent: hierarchy.form
//   blocks = 16                  # with use = "copse": the pipeline block count of these
//                                #   calls (>= 1); absent: collectives.blocks
//   note = "np 4: 0.01x by median"  # free text, shown by `copse config`
//   shape = "np4"                # the measured shape the row stands for (written
//                                #   by `copse tune`, which replaces a shape's rows
//                                #   when it measures the shape again)
//
// Every bound is optional (absent: any). `hierarchy` exists because across
// nodes no one form is fastest for every collective and size: at 2 hosts x
// 2 a 1 MiB bcast took 1211 us in the leader form and 581 in lanes, while
// allreduce ran best in the leader form. A collective that takes no form
// (scatter, gather, alltoall), lanes on nodes of unequal size and a form the
// configured algorithm cannot run keep the configured form
// (Comm::set_form). The form matters because the MPI
// library's nonblocking and persistent collectives are other code than its
// blocking ones (Open MPI's libnbc against its tuned component): a blocking
// call's measurement does not decide them (`copse tune` measures them apart;
// config/tune.hpp says what it writes for a form it did not measure). A row for a shape the job does not
// have never matches, so a table measured on one machine runs anywhere.
// Mistakes are UsageErrors naming the file, the line and the reason.

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/registry.hpp"
#include "config/config.hpp"

namespace copse {

enum class Provider : std::uint8_t { copse, mpi };
std::string_view to_string(Provider provider);  // "copse", "mpi"

// How an application called a collective: MPI_Allreduce, MPI_Iallreduce
// (then a wait), or MPI_Allreduce_init (then MPI_Start and a wait).
enum class CallForm : std::uint8_t { blocking, nonblocking, persistent };
inline constexpr std::array<CallForm, 3> kCallForms = {CallForm::blocking, CallForm::nonblocking, CallForm::persistent};
std::string_view to_string(CallForm form);  // "blocking", "nonblocking", "persistent"
std::optional<CallForm> call_form_named(std::string_view name);

// What a decision is made from: the same on every process of the call, so
// that all of them decide alike.
struct CallShape {
  MpiCollective collective = MpiCollective::allreduce;
  std::uint64_t bytes = 0;  // per process, as MpiOptions::min_bytes measures them
  int ranks = 1;            // the communicator's size
  int nodes = 1;
  int hosts = 1;  // its shared-memory islands (nodes, unless they are virtual)
  CallForm form = CallForm::blocking;
};

struct DecisionRow {
  std::optional<MpiCollective> collective;  // none: every collective
  std::optional<CallForm> form;             // none: every form
  std::uint64_t min_bytes = 0, max_bytes = std::numeric_limits<std::uint64_t>::max();
  int min_ranks = 0, max_ranks = std::numeric_limits<int>::max();
  int min_nodes = 0, max_nodes = std::numeric_limits<int>::max();
  int min_hosts = 0, max_hosts = std::numeric_limits<int>::max();
  Provider use = Provider::mpi;
  std::optional<Form> hierarchy;  // use copse: the form it plans in; none: the configured one
  int blocks = 0;                 // use copse: the block count it plans with; 0: the configured one
  std::string note;
  std::string shape;  // `copse tune`'s: the measured shape ("np4", "np4-vn2"); empty: written by hand
  int line = 0;       // in the file (0: made in code)

  // Whether the row can decide calls of `c` in `form` on a communicator of
  // this shape (its bytes aside).
  bool fits(MpiCollective c, CallForm form, int ranks, int nodes, int hosts) const;
  bool matches(const CallShape& call) const;
  bool operator==(const DecisionRow&) const = default;
};

struct DecisionTable {
  std::string source;  // the file, or "built-in"
  Provider fallback = Provider::mpi;
  std::vector<DecisionRow> rows;

  // The index of the first row that matches, or rows.size() when none does.
  std::size_t find(const CallShape& call) const;
  // The rows that can match calls of `collective` in `form` on a
  // communicator of `ranks`, `nodes` and `hosts`, in order: what a
  // communicator keeps, so that a call then compares its bytes with a few
  // rows only.
  std::vector<std::uint32_t> rows_for(MpiCollective collective, CallForm form, int ranks, int nodes, int hosts) const;
  // The first of `candidates` (rows_for's) that takes `bytes`, or rows.size().
  std::size_t find(const std::vector<std::uint32_t>& candidates, std::uint64_t bytes) const {
    for (const std::uint32_t i : candidates)
      if (bytes >= rows[i].min_bytes && bytes <= rows[i].max_bytes) return i;
    return rows.size();
  }
  Provider decide(const CallShape& call) const {
    const std::size_t i = find(call);
    return i < rows.size() ? rows[i].use : fallback;
  }
  // One line per row, for `copse config` and error messages; with `calls`
  // (per row, then the calls no row matched: a stats file's counts) each
  // line says how many calls the row decided.
  std::string describe(const std::vector<std::uint64_t>& calls = {}) const;
};

// Parses a table's text; `source` names it in errors ("decision table
// FILE, line N: reason").
DecisionTable parse_decision_table(std::string_view text, const std::string& source);
// The text parse_decision_table reads back as `table` (its rows' lines
// aside): `header` first, each of its lines as a comment, then `default`
// and the rows, every bound that is not the default written, sizes of whole
// KiB as SIZE text ("128KiB"), others as integers.
std::string write_decision_table(const DecisionTable& table, std::string_view header);
// Reads and parses a file (UsageError when it cannot be read).
DecisionTable load_decision_table(const std::string& path);
// The table copse ships, measured on its development machine
// (config/default_decisions.toml).
const DecisionTable& builtin_decision_table();
// The table mpi.table names: the built-in one when empty, none for "none",
// else the file.
std::optional<DecisionTable> configured_decision_table(const MpiOptions& options);

}  // namespace copse
