/* Where glibc malloc puts a block of 16 MiB after MPI_Init, under
 * LD_PRELOAD=libcopse_mpi.so: with mpi.keep_heap (the default) on the heap,
 * since copse fixed the mmap threshold at 32 MiB; with it off, mmapped, as
 * the dynamic threshold of a fresh process stays below it (it rises only as
 * the process frees larger mmapped blocks; Open MPI's set-up frees about
 * 2 MiB). The block is written, freed and allocated again: on the heap the
 * second allocation reuses the first's pages.
 *
 *   heap heap   exit 0 if the block came from the heap
 *   heap mmap   exit 0 if it was mmapped
 */
#define _DEFAULT_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const size_t bytes = (size_t)16 << 20;
  char* block = malloc(bytes);
  memset(block, 1, bytes);
  free(block);
  block = malloc(bytes);
  /* The heap lies below the program break; mmapped blocks far above it. */
  const int on_heap = (uintptr_t)block < (uintptr_t)sbrk(0);
  free(block);
  const int want_heap = argc > 1 && strcmp(argv[1], "heap") == 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (on_heap != want_heap)
    fprintf(stderr, "rank %d: a block of 16 MiB was %s, expected %s\n", rank, on_heap ? "on the heap" : "mmapped",
            want_heap ? "on the heap" : "mmapped");
  MPI_Finalize();
  return on_heap == want_heap ? 0 : 1;
}
