/* Nonblocking allreduce's overlap, measured (issue 19): run it under
 * libcopse_mpi.so (LD_PRELOAD) and without, at np 2.
 *
 *   nonblocking_overlap [BYTES [REPS]]
 *
 * Overlap: the median time of MPI_Iallreduce + MPI_Wait of BYTES (default
 * 1 MiB of doubles) alone (t_comm), of a computation calibrated to take as
 * long (t_comp), and of the two together -- start, compute, wait (t_both),
 * interleaved so that the load of a shared machine falls on all three alike;
 * the computation either without MPI calls or with an MPI_Test every 1/16
 * of it. Hidden fraction = (t_comm + t_comp - t_both) / t_comm.
 * (Persistent against blocking: bench/persistent_allreduce.c.)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "median.h"

static volatile double sink;
static double compute(long iterations, MPI_Request* poll) {
  double x = 1.0;
  const long chunk = iterations / 16 + 1;
  for (long i = 0; i < iterations; ++i) {
    x = x * 1.0000001 + 1e-9;
    if (poll && i % chunk == 0) {
      int flag;
      MPI_Test(poll, &flag, MPI_STATUS_IGNORE);
    }
  }
  sink = x;
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long bytes = argc > 1 ? atol(argv[1]) : 1L << 20;
  const int reps = argc > 2 ? atoi(argv[2]) : 30;
  const int n = (int)(bytes / 8);
  double *in = malloc((size_t)n * 8), *out = malloc((size_t)n * 8), *t = malloc(sizeof(double) * 20000);
  for (int i = 0; i < n; ++i) in[i] = rank + i;
  MPI_Request r;
  for (int i = 0; i < 5; ++i) { /* warm-up: plans, connections */
    MPI_Iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  }
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    t[i] = MPI_Wtime() - t0;
  }
  double t_comm = median(t, reps);
  MPI_Bcast(&t_comm, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  /* Calibrate the computation to t_comm: three rounds of scaling by the
   * median of 5 timings (rank 0's count for everyone). */
  long iterations = 100000;
  for (int round = 0; round < 3; ++round) {
    double took[5];
    for (int i = 0; i < 5; ++i) {
      const double t0 = MPI_Wtime();
      compute(iterations, NULL);
      took[i] = MPI_Wtime() - t0;
    }
    iterations = (long)(iterations * t_comm / median(took, 5)) + 1;
  }
  MPI_Bcast(&iterations, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  /* Then, interleaved so that the machine's load falls on all alike: the
   * collective alone, the computation alone, and both (without, then with
   * polling); medians of each. */
  double *comm = malloc(sizeof(double) * (size_t)reps), *comp = malloc(sizeof(double) * (size_t)reps),
         *both0 = malloc(sizeof(double) * (size_t)reps), *both1 = malloc(sizeof(double) * (size_t)reps);
  for (int i = 0; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    comm[i] = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    compute(iterations, NULL);
    comp[i] = MPI_Wtime() - t0;
    for (int polling = 0; polling < 2; ++polling) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Iallreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
      compute(iterations, polling ? &r : NULL);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
      (polling ? both1 : both0)[i] = MPI_Wtime() - t0;
    }
  }
  t_comm = median(comm, reps);
  const double t_comp = median(comp, reps);
  const double both[2] = {median(both0, reps), median(both1, reps)};
  free(comm), free(comp), free(both0), free(both1);
  if (rank == 0) {
    printf("iallreduce %ld B: t_comm %.1f us, t_comp %.1f us\n", bytes, t_comm * 1e6, t_comp * 1e6);
    for (int polling = 0; polling < 2; ++polling)
      printf("  %s: t_both %.1f us, hidden %.0f%%\n", polling ? "computing with MPI_Test every 1/16" : "computing without MPI calls",
             both[polling] * 1e6, 100 * (t_comm + t_comp - both[polling]) / t_comm);
  }
  free(in), free(out), free(t);
  MPI_Finalize();
  return 0;
}
