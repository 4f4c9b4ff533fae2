/* The cost libcopse_mpi.so adds to a call it passes to the MPI library: a
 * plain MPI program (no copse header) timing tight loops of calls that copse
 * passes through, to be run once with and once without LD_PRELOAD; the
 * difference per call is the interposer's cost. Run it on one process, so the
 * MPI library's own work is as small as it gets:
 *
 *   mpirun -np 1 build/release/pmpi_passthrough
 *   mpirun -np 1 -x LD_PRELOAD=$PWD/build/release/libcopse_mpi.so build/release/pmpi_passthrough
 *   mpirun -np 1 -x LD_PRELOAD=... -x COPSE_MPI_SERVE=none build/release/pmpi_passthrough
 *
 * Each line: the call, then nanoseconds per call (the fastest of 15 runs of
 * 200000 calls). The calls: MPI_Allreduce of one element of a derived
 * datatype with a user operator (copse checks the datatype, finds it is not
 * its own); MPI_Allreduce of one int with MPI_SUM on MPI_COMM_SELF (a
 * one-process communicator, found in its cached attribute; with
 * COPSE_MPI_SERVE=none, the first check already passes it); MPI_Barrier on
 * MPI_COMM_SELF (likewise). */
#include <mpi.h>
#include <stdio.h>

static void first_of_pair(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)in, (void)inout, (void)len, (void)type;
}

static double best_ns(int what, MPI_Datatype pair, MPI_Op op) {
  enum { RUNS = 15, CALLS = 200000 };
  int a[2] = {1, 2}, b[2];
  double best = 1e30;
  for (int run = 0; run < RUNS; ++run) {
    const double start = MPI_Wtime();
    for (int i = 0; i < CALLS; ++i) {
      if (what == 0)
        MPI_Allreduce(a, b, 1, pair, op, MPI_COMM_SELF);
      else if (what == 1)
        MPI_Allreduce(a, b, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
      else
        MPI_Barrier(MPI_COMM_SELF);
    }
    const double ns = (MPI_Wtime() - start) * 1e9 / CALLS;
    if (ns < best) best = ns;
  }
  return best;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  MPI_Op op;
  MPI_Op_create(first_of_pair, 1, &op);
  const char* names[] = {"MPI_Allreduce, derived datatype", "MPI_Allreduce, MPI_INT on MPI_COMM_SELF",
                         "MPI_Barrier on MPI_COMM_SELF"};
  for (int what = 0; what < 3; ++what) printf("%-42s %6.1f ns\n", names[what], best_ns(what, pair, op));
  MPI_Op_free(&op);
  MPI_Type_free(&pair);
  MPI_Finalize();
  return 0;
}
