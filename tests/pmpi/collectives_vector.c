/* The v-variants of tests/pmpi/collectives.c: MPI_Allgatherv, MPI_Gatherv
 * (to the last rank), MPI_Scatterv (from the middle one) and MPI_Alltoallv
 * with unequal counts, every third block empty, displacements with a gap of
 * one int after each block (which must stay untouched), out of place and in
 * place; then an allgatherv into a gapped derived type, which copse passes to
 * the MPI library on every process. Rank s's block for rank d (alltoallv,
 * scatterv) is input(s, 10 d + i); a gathered block is input(s, i). */
#include <stdlib.h>

#include "collectives.h"

static int v_count(int v) { return v % 3 == 1 ? 0 : 1 + v % 2; }
static int pair_count(int s, int d) { return (s + 2 * d) % 3 == 1 ? 0 : 1 + (s * d) % 2; }

/* Gapped displacements of counts[0..p-1]; returns the span in ints. */
static int gapped(const int* counts, int* displs, int p) {
  int at = 0;
  for (int v = 0; v < p; ++v) displs[v] = at, at += counts[v] + 1;
  return at;
}

static void gathers(MPI_Comm comm, const char* label, const int* world, int in_place) {
  const int p = comm_size(comm), r = comm_rank(comm), root = p - 1;
  int *counts = malloc(sizeof(int) * (size_t)p), *displs = malloc(sizeof(int) * (size_t)p), mine[2] = {0, 0};
  for (int v = 0; v < p; ++v) counts[v] = v_count(v);
  const int span = gapped(counts, displs, p);
  int* all = malloc(sizeof(int) * (size_t)(span + 1));
  for (int i = 0; i < counts[r]; ++i) mine[i] = input(world_rank, i);
  for (int i = 0; i < span; ++i) all[i] = -7;
  if (in_place)
    for (int i = 0; i < counts[r]; ++i) all[displs[r] + i] = mine[i];
  expect(ALLGATHERV, comm, 1, 8);
  MPI_Allgatherv(in_place ? MPI_IN_PLACE : mine, counts[r], MPI_INT, all, counts, displs, MPI_INT, comm);
  for (int v = 0; v < p; ++v)
    for (int i = 0; i <= counts[v]; ++i) {
      const int want = i == counts[v] ? -7 : input(world[v], i);
      CHECK(all[displs[v] + i] == want, "%s: allgatherv%s block %d element %d", label, in_place ? " in place" : "", v,
            i);
    }
  for (int i = 0; i < span; ++i) all[i] = -7;
  if (in_place && r == root) /* the root's block in place */
    for (int i = 0; i < counts[r]; ++i) all[displs[r] + i] = mine[i];
  expect(GATHERV, comm, 1, 8);
  MPI_Gatherv(in_place && r == root ? MPI_IN_PLACE : mine, counts[r], MPI_INT, all, counts, displs, MPI_INT, root,
              comm);
  for (int v = 0; r == root && v < p; ++v)
    for (int i = 0; i <= counts[v]; ++i)
      CHECK(all[displs[v] + i] == (i == counts[v] ? -7 : input(world[v], i)), "%s: gatherv block %d element %d", label,
            v, i);
  free(all);
  free(displs);
  free(counts);
}

static void scatters(MPI_Comm comm, const char* label, const int* world, int in_place) {
  const int p = comm_size(comm), r = comm_rank(comm), root = p / 2;
  int *counts = malloc(sizeof(int) * (size_t)p), *displs = malloc(sizeof(int) * (size_t)p);
  int *sc = malloc(sizeof(int) * (size_t)p), *sd = malloc(sizeof(int) * (size_t)p);
  int *rc = malloc(sizeof(int) * (size_t)p), *rd = malloc(sizeof(int) * (size_t)p), mine[2] = {-7, -7};
  for (int v = 0; v < p; ++v) counts[v] = v_count(v), sc[v] = pair_count(r, v), rc[v] = pair_count(v, r);
  const int span = gapped(counts, displs, p), sspan = gapped(sc, sd, p), rspan = gapped(rc, rd, p);
  int *send = malloc(sizeof(int) * (size_t)(span + sspan + 1)), *recv = malloc(sizeof(int) * (size_t)(rspan + 1));
  for (int v = 0; v < p; ++v)
    for (int i = 0; i < counts[v]; ++i) send[displs[v] + i] = input(world_rank, 10 * v + i);
  expect(SCATTERV, comm, 1, 8);
  const int here = in_place && r == root;
  MPI_Scatterv(send, counts, displs, MPI_INT, here ? MPI_IN_PLACE : mine, counts[r], MPI_INT, root, comm);
  for (int i = 0; i < counts[r]; ++i)
    CHECK((here ? send[displs[r] + i] : mine[i]) == input(world[root], 10 * r + i), "%s: scatterv element %d", label,
          i);
  /* alltoallv, out of place: asymmetric counts */
  for (int d = 0; d < p; ++d)
    for (int i = 0; i < sc[d]; ++i) send[sd[d] + i] = input(world_rank, 10 * d + i);
  for (int i = 0; i < rspan; ++i) recv[i] = -7;
  expect(ALLTOALLV, comm, 1, 8);
  MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, comm);
  for (int s = 0; s < p; ++s)
    for (int i = 0; i <= rc[s]; ++i)
      CHECK(recv[rd[s] + i] == (i == rc[s] ? -7 : input(world[s], 10 * r + i)), "%s: alltoallv block %d element %d",
            label, s, i);
  free(send), free(recv), free(counts), free(displs), free(sc), free(sd), free(rc), free(rd);
}

/* Alltoallv in place: MPI needs the same counts both ways, a symmetric pattern. */
static void alltoallv_in_place(MPI_Comm comm, const char* label, const int* world) {
  const int p = comm_size(comm), r = comm_rank(comm);
  int *counts = malloc(sizeof(int) * (size_t)p), *displs = malloc(sizeof(int) * (size_t)p);
  for (int v = 0; v < p; ++v) counts[v] = (v + r) % 3 == 1 ? 0 : 1 + (v * r) % 2;
  const int span = gapped(counts, displs, p);
  int* x = malloc(sizeof(int) * (size_t)(span + 1));
  for (int i = 0; i < span; ++i) x[i] = -7;
  for (int v = 0; v < p; ++v)
    for (int i = 0; i < counts[v]; ++i) x[displs[v] + i] = input(world_rank, 10 * v + i);
  expect(ALLTOALLV, comm, 1, 8);
  MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, x, counts, displs, MPI_INT, comm);
  for (int s = 0; s < p; ++s)
    for (int i = 0; i <= counts[s]; ++i)
      CHECK(x[displs[s] + i] == (i == counts[s] ? -7 : input(world[s], 10 * r + i)),
            "%s: alltoallv in place block %d element %d", label, s, i);
  free(x), free(counts), free(displs);
}

void vector_collectives(MPI_Comm comm, const char* label) {
  const int p = comm_size(comm), r = comm_rank(comm);
  int* world = members(comm);
  for (int in_place = 0; in_place < 2; ++in_place) {
    gathers(comm, label, world, in_place);
    scatters(comm, label, world, in_place);
  }
  alltoallv_in_place(comm, label, world);
  /* a gapped derived receive type (a pair of ints spaced by 3): the MPI library's */
  MPI_Datatype pair, spaced;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_create_resized(pair, 0, 3 * (MPI_Aint)sizeof(int), &spaced);
  MPI_Type_commit(&spaced);
  int *counts = malloc(sizeof(int) * (size_t)p), *displs = malloc(sizeof(int) * (size_t)p);
  int *all = malloc(sizeof(int) * (size_t)(3 * p)), mine[2] = {input(world_rank, 0), input(world_rank, 1)};
  for (int v = 0; v < p; ++v) counts[v] = 1, displs[v] = v;
  for (int i = 0; i < 3 * p; ++i) all[i] = -7;
  expect(ALLGATHERV, comm, 0, 8);
  MPI_Allgatherv(mine, 2, MPI_INT, all, counts, displs, spaced, comm);
  for (int q = 0; q < 3 * p; ++q)
    CHECK(all[q] == (q % 3 == 2 ? -7 : input(world[q / 3], q % 3)), "%s: allgatherv spaced element %d (rank %d)", label,
          q, r);
  MPI_Type_free(&spaced);
  MPI_Type_free(&pair);
  free(all), free(counts), free(displs), free(world);
}
