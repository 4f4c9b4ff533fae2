/* A small MPI application for the trace file (mpi.trace) and `copse replay`:
 * an iterative solver's pattern of collectives, with computation between
 * them that differs between processes.
 *
 *   trace_app [ITERATIONS [N]]     (defaults 5 and 65536)
 *
 * Per iteration, on MPI_COMM_WORLD unless said otherwise:
 *   compute (1 + rank % 4) * 1 ms       -- busy, so the trace's gaps are at least this
 *   MPI_Allreduce of N doubles, sum     -- "the residual vector"
 *   compute 0.5 ms
 *   MPI_Allreduce of 1 double, max      -- "the norm"
 *   MPI_Bcast of 1000 ints from root 1 (root 0 on one process)
 *   MPI_Reduce of N/4 floats, sum, to root 0
 *   MPI_Allgather of 16 ints per process
 *   MPI_Allreduce of 256 ints, sum, on half of the processes (MPI_Comm_split by rank parity)
 * then one MPI_Barrier. Every result is checked; a wrong one exits 1. The
 * calls are 6 per iteration plus the barrier: 6 * ITERATIONS + 1 per process.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static void compute(double seconds) {
  const double end = MPI_Wtime() + seconds;
  while (MPI_Wtime() < end) {
  }
}

static int fail(int rank, const char* what) {
  printf("trace_app: rank %d: wrong %s\n", rank, what);
  fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iterations = argc > 1 ? atoi(argv[1]) : 5;
  const int n = argc > 2 ? atoi(argv[2]) : 65536;
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  int half_size = 0;
  MPI_Comm_size(half, &half_size);

  double* v = malloc(sizeof(double) * (size_t)n);
  float* f = malloc(sizeof(float) * (size_t)(n / 4 + 1));
  float* fr = malloc(sizeof(float) * (size_t)(n / 4 + 1));
  int* gathered = malloc(sizeof(int) * 16 * (size_t)size);
  int b[1000], h[256];
  for (int it = 0; it < iterations; ++it) {
    compute((1 + rank % 4) * 1e-3);
    for (int i = 0; i < n; ++i) v[i] = rank + i % 7;
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i)
      if (v[i] != size * (size - 1) / 2.0 + size * (i % 7)) return fail(rank, "allreduce");
    compute(0.5e-3);
    double norm = rank, max = 0;
    MPI_Allreduce(&norm, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (max != size - 1) return fail(rank, "norm");
    const int root = size > 1 ? 1 : 0;
    for (int i = 0; i < 1000; ++i) b[i] = rank == root ? it + i : -1;
    MPI_Bcast(b, 1000, MPI_INT, root, MPI_COMM_WORLD);
    for (int i = 0; i < 1000; ++i)
      if (b[i] != it + i) return fail(rank, "bcast");
    for (int i = 0; i < n / 4; ++i) f[i] = (float)(rank + i % 3);
    MPI_Reduce(f, fr, n / 4, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
      for (int i = 0; i < n / 4; ++i)
        if (fr[i] != (float)(size * (size - 1) / 2 + size * (i % 3))) return fail(rank, "reduce");
    int mine[16];
    for (int i = 0; i < 16; ++i) mine[i] = rank * 100 + i;
    MPI_Allgather(mine, 16, MPI_INT, gathered, 16, MPI_INT, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < 16; ++i)
        if (gathered[r * 16 + i] != r * 100 + i) return fail(rank, "allgather");
    for (int i = 0; i < 256; ++i) h[i] = 1;
    MPI_Allreduce(MPI_IN_PLACE, h, 256, MPI_INT, MPI_SUM, half);
    for (int i = 0; i < 256; ++i)
      if (h[i] != half_size) return fail(rank, "allreduce on half");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  free(v);
  free(f);
  free(fr);
  free(gathered);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
