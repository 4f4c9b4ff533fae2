// Every form (plan/planner.hpp) through the MPI Comm on virtual nodes:
//   copse_mpi_forms K     (virtual nodes of K consecutive processes)
// runs all six collectives in each form (flat, leader, multi-leader, lanes,
// auto; every algorithm "auto") with float sums and the non-commutative
// affine operator against the sequential reference, and checks that every
// rank's float allreduce is bitwise rank 0's. A form that cannot take a
// collective (lanes beyond allreduce, until plan_lanes decomposes it) must
// refuse it with a UsageError on every process. Then, in the flat, leader,
// multi-leader and lanes forms with a few algorithms named, the plan the MPI
// Comm runs for each call key (Team::compiled_plan) must be, step by step,
// the plan the emulator's planner compiles for the same key on the same
// nodes (tests/plan_check.hpp, as tests/test_planner.cpp checks the thread
// Comm's). Exit status 1 if any check failed anywhere.

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/mpi_comm.hpp"
#include "tests/forms_check.hpp"
#include "tests/heap_policy.hpp"
#include "tests/plan_check.hpp"
#include "tools/experiment.hpp"

using namespace copse;
using Bytes = testing::FormBytes;

namespace {

long g_checks = 0, g_failures = 0;
int g_rank = 0;

void expect(bool ok, const std::string& what) {
  ++g_checks;
  if (ok) return;
  ++g_failures;
  std::fprintf(stderr, "copse_mpi_forms: rank %d: FAILED %s\n", g_rank, what.c_str());
}

void run_form(Form form, int ranks_per_node) {
  mpi::CommOptions o;
  o.form = form;
  o.ranks_per_node = ranks_per_node;
  o.allreduce = o.reduce = o.bcast = o.barrier = o.allgather = o.reduce_scatter = "auto";
  o.wait_timeout = std::chrono::milliseconds(60000);
  mpi::Team team(MPI_COMM_WORLD, o, 1);
  mpi::Comm& comm = team.comm(0);
  const std::vector<ReduceOp> ops{builtin_op("sum", DType::float32), builtin_op("affine", DType::uint32)};
  for (Collective c : all_collectives())
    for (const ReduceOp& op : ops)
      for (std::uint64_t n : {std::uint64_t{3}, std::uint64_t{1000}}) {
        const std::string tag =
            std::string(to_string(form)) + ": " + std::string(to_string(c)) + " " + op.name + " n=" + std::to_string(n);
        int refused = 0;
        Bytes result;
        try {
          expect(testing::check_collective(comm, c, op, n, result), tag);
        } catch (const UsageError& e) {
          refused = 1;
          // Only lanes may refuse, and only beyond allreduce.
          expect(form == Form::lanes && c != Collective::allreduce, tag + " refused: " + e.what());
        }
        int everywhere = 0;
        PMPI_Allreduce(&refused, &everywhere, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        int p = 0;
        PMPI_Comm_size(MPI_COMM_WORLD, &p);
        expect(everywhere == 0 || everywhere == p, tag + ": refused on some processes only");
        if (refused || c != Collective::allreduce || op.dtype != DType::float32) continue;
        Bytes first = result;
        PMPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
        expect(first == result, tag + ": not bitwise rank 0's");
      }
}

// One call through `team`'s Comm, then its plan against `cluster`'s for the
// same key: the same plan, or refused by both.
void compare_plan(mpi::Team& team, const mpi::CommOptions& o, const EmulatedCluster& cluster, Collective c,
                  const ReduceOp& op, std::uint64_t n) {
  mpi::Comm& comm = team.comm(0);
  const std::string tag = std::string(to_string(o.form)) + ": plan of " + std::string(to_string(c)) + " " +
                          o.algorithm(c) + " " + op.name + " n=" + std::to_string(n);
  bool refused = false;
  Bytes result;
  try {
    expect(testing::check_collective(comm, c, op, n, result), tag + ": result");
  } catch (const UsageError&) {
    refused = true;
  }
  // The key as the Comm makes it (check_collective's roots and counts).
  const bool moves_data = c == Collective::bcast || c == Collective::allgather || !has_hierarchy(c);
  const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
  const std::size_t scalar = dtype_size(op.dtype);
  const std::size_t eb = c == Collective::barrier ? 0 : moves_data ? scalar : op.element_bytes;
  const std::uint64_t count = c == Collective::barrier ? 1 : moves_data ? n * op.element_bytes / scalar : n;
  const int root = c == Collective::reduce || c == Collective::gather   ? comm.size() - 1
                   : c == Collective::bcast || c == Collective::scatter ? 1
                                                                        : 0;
  const bool commutative = reduces ? op.commutative : true;
  const CallKey key = o.call_key(c, count, eb, commutative, root);
  const std::shared_ptr<const CompiledPlan> ours = team.compiled_plan(key);
  try {
    const CompiledPlan theirs =
        cluster.planner().plan(cluster.key(c, o.algorithm(c), eb, commutative, count, root, std::nullopt));
    expect(!refused && ours, tag + ": the emulator plans it, the MPI Comm " + (refused ? "refused it" : "has no plan"));
    if (ours)
      expect(testing::plan_difference(*ours, theirs).empty(), tag + ": " + testing::plan_difference(*ours, theirs));
  } catch (const UsageError& e) {
    expect(refused && !ours, tag + ": the emulator refuses it (" + e.what() + "), the MPI Comm does not");
  }
}

// Every form's plans against the emulator's, on nodes of k processes.
void compare_plans(Form form, int ranks_per_node) {
  struct Algorithms {
    const char *allreduce, *reduce, *bcast, *barrier, *allgather, *reduce_scatter, *scatter, *gather, *alltoall;
  };
  // Not the defaults of scatter, gather and alltoall: a Comm reads those as
  // the selection (plan/planner.hpp, flat only), the emulator as named.
  for (const Algorithms& a :
       {Algorithms{"rabenseifner", "binary-tree", "binomial", "dual-root", "binary-tree", "auto", "flat", "flat",
                   "bruck"},
        Algorithms{"auto", "auto", "auto", "auto", "auto", "binary-tree", "auto", "auto", "auto"}}) {
    mpi::CommOptions o;
    o.form = form;
    o.ranks_per_node = ranks_per_node;
    o.allreduce = a.allreduce, o.reduce = a.reduce, o.bcast = a.bcast, o.barrier = a.barrier;
    o.allgather = a.allgather, o.reduce_scatter = a.reduce_scatter;
    o.scatter = a.scatter, o.gather = a.gather, o.alltoall = a.alltoall;
    o.wait_timeout = std::chrono::milliseconds(60000);
    mpi::Team team(MPI_COMM_WORLD, o, 1);
    ClusterSpec spec;
    spec.ranks_per_node = team.layout().node_sizes();
    spec.form = form;
    spec.grouping = o.grouping;
    spec.model = o.model;
    const EmulatedCluster cluster(spec);
    for (Collective c : all_collectives())
      for (const ReduceOp& op : {builtin_op("sum", DType::float32), builtin_op("affine", DType::uint32)})
        for (std::uint64_t n : {std::uint64_t{3}, std::uint64_t{1000}}) compare_plan(team, o, cluster, c, op, n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  copse::testing::keep_freed_memory();
  MPI_Init(&argc, &argv);
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  const int k = argc > 1 ? std::atoi(argv[1]) : 2;
  for (Form form : {Form::flat, Form::leader, Form::multi_leader, Form::lanes, Form::automatic}) {
    try {
      run_form(form, k);
      if (form != Form::automatic) compare_plans(form, k);  // auto: the MPI Team has one hierarchy, not both
    } catch (const std::exception& e) {
      expect(false, std::string(to_string(form)) + ": uncaught: " + e.what());
    }
  }
  long counts[2] = {g_checks, g_failures}, totals[2] = {0, 0};
  PMPI_Reduce(counts, totals, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (g_rank == 0) std::printf("copse_mpi_forms (nodes of %d): %ld checks, %ld failed\n", k, totals[0], totals[1]);
  const int status = g_rank == 0 && totals[1] > 0 ? 1 : 0;
  MPI_Finalize();
  return status;
}
