/* Persistent allreduce against blocking, side by side (issue 19's acceptance
 * point: MPI_Start + MPI_Wait costs at most MPI_Allreduce per call). Run it
 * under libcopse_mpi.so (LD_PRELOAD), and without for the library's own.
 *
 *   persistent_allreduce [BYTES [ROUNDS [CALLS [LATE]]]]
 *
 * Each round times CALLS back-to-back calls of each form on BYTES of
 * doubles (default 8 B, 1000 rounds of 100 calls), the two forms alternated
 * and their order swapped every round, so that the load of a shared
 * machine falls on both alike; short rounds, so that those a preemption
 * hits are outliers the medians drop. Rank 0 prints the medians of the per-call
 * times over the rounds and the median of the rounds' ratios
 * persistent / blocking (each round's two timings taken moments apart).
 * LATE > 0: the last rank computes LATE iterations before each call, so that
 * it comes last and never waits -- under valgrind --tool=callgrind its
 * instructions per call are the calls' own work, without the spin. */
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> /* Open MPI's MPIX_Allreduce_init */
#endif
#include <stdio.h>
#include <stdlib.h>

#include "median.h"

static volatile double sink;
static void compute(long iterations) {
  double x = 1.0;
  for (long i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
#ifndef OMPI_HAVE_MPI_EXT_PCOLLREQ
  fprintf(stderr, "persistent_allreduce: this MPI has no MPIX_Allreduce_init\n");
  MPI_Finalize();
  return 0;
#else
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long bytes = argc > 1 ? atol(argv[1]) : 8;
  const int rounds = argc > 2 ? atoi(argv[2]) : 1000;
  const int calls = argc > 3 ? atoi(argv[3]) : 100;
  const long late = argc > 4 && rank == size - 1 ? atol(argv[4]) : 0;
  const int n = bytes >= 8 ? (int)(bytes / 8) : 1;
  double *in = malloc((size_t)n * 8), *out = malloc((size_t)n * 8);
  double *persistent = malloc(sizeof(double) * (size_t)rounds), *blocking = malloc(sizeof(double) * (size_t)rounds),
         *ratio = malloc(sizeof(double) * (size_t)rounds);
  for (int i = 0; i < n; ++i) in[i] = rank + i;
  MPI_Request r;
  MPIX_Allreduce_init(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
  for (int i = 0; i < 100; ++i) { /* warm-up: plans, pages, caches */
    MPI_Start(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int start_form = (round + k) % 2 == 0;
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      if (start_form)
        for (int i = 0; i < calls; ++i) {
          compute(late);
          MPI_Start(&r);
          MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
      else
        for (int i = 0; i < calls; ++i) {
          compute(late);
          MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
      (start_form ? persistent : blocking)[round] = (MPI_Wtime() - t0) / calls;
    }
    ratio[round] = persistent[round] / blocking[round];
  }
  MPI_Request_free(&r);
  if (rank == 0)
    printf("%ld B allreduce per call: persistent Start+Wait %.3f us, blocking %.3f us, ratio %.3f "
           "(medians of %d rounds x %d calls)\n",
           bytes, median(persistent, rounds) * 1e6, median(blocking, rounds) * 1e6, median(ratio, rounds), rounds,
           calls);
  free(in), free(out), free(persistent), free(blocking), free(ratio);
  MPI_Finalize();
  return 0;
#endif
}
