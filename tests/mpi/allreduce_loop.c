/* A plain MPI program that times an 8-byte MPI_Allreduce loop, for
 * tests/mpi/cpuset.sh: run with and without LD_PRELOAD=libcopse_mpi.so,
 * pinned to one core and not. Batches of calls between barriers; rank 0
 * prints the median batch's time per call and checks every result (the sum
 * of 1..p):
 *
 *   allreduce_loop [BATCHES [CALLS]]   default 21 batches of 50 calls
 *   prints "allreduce-loop: <us> us per call"; exit 1 on a wrong result.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int batches = argc > 1 ? atoi(argv[1]) : 21, calls = argc > 2 ? atoi(argv[2]) : 50;
  int rank = 0, size = 1, wrong = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double* per_call = calloc((size_t)(batches > 0 ? batches : 1), sizeof(double));
  const long long expected = (long long)size * (size + 1) / 2;
  for (int b = -1; b < batches; ++b) { /* batch -1: the warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < calls; ++i) {
      long long in = rank + 1, out = 0;
      MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      wrong += out != expected;
    }
    if (b >= 0) per_call[b] = (MPI_Wtime() - start) / calls * 1e6;
  }
  int any_wrong = 0;
  MPI_Allreduce(&wrong, &any_wrong, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && batches > 0) {
    qsort(per_call, (size_t)batches, sizeof(double), by_value);
    printf("allreduce-loop: %.2f us per call\n", per_call[batches / 2]);
    if (any_wrong) printf("allreduce-loop: wrong results\n");
  }
  free(per_call);
  MPI_Finalize();
  return any_wrong ? 1 : 0;
}
