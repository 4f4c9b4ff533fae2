/* The C API (mpi/copse_mpi.h) from a C program linked with libcopse_mpi.so:
 * a team of one thread rank per process, every collective checked against a
 * sequential computation (in place, a root other than 0, a non-commutative
 * user operator); the errors a caller can make, each a code with a message;
 * a team of two thread ranks per process; and a team left alive at
 * MPI_Finalize, torn down there and freed afterwards. Exit status 0 if all
 * is right. */
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/copse_mpi.h"

static int rank, size, failures;

/* A failed check: one line on stderr, written whole. */
static void report(int line, const char* format, ...) {
  char text[512];
  int n = snprintf(text, sizeof text, "rank %d: line %d: ", rank, line);
  va_list args;
  va_start(args, format);
  vsnprintf(text + n, sizeof text - (size_t)n, format, args);
  va_end(args);
  fprintf(stderr, "%s\n", text);
  ++failures;
}
#define CHECK(cond, ...)                        \
  do {                                          \
    if (!(cond)) report(__LINE__, __VA_ARGS__); \
  } while (0)

/* A call that must succeed. */
#define OK(call)                                                                                    \
  do {                                                                                              \
    const int rc_ = (call);                                                                         \
    CHECK(rc_ == COPSE_SUCCESS, "%s: %s: %s", #call, copse_error_name(rc_), copse_error_message()); \
  } while (0)

/* x -> a*x + b as (a, b) in the high and low halves; "first x, then y". */
static uint64_t affine(uint64_t x, uint64_t y) {
  const uint32_t a1 = (uint32_t)(x >> 32), b1 = (uint32_t)x, a2 = (uint32_t)(y >> 32), b2 = (uint32_t)y;
  return ((uint64_t)(uint32_t)(a1 * a2) << 32) | (uint32_t)(a2 * b1 + b2);
}
static void affine_fn(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const uint64_t* x = in;
  uint64_t* y = inout;
  for (int i = 0; i < *len; ++i) y[i] = affine(x[i], y[i]);
}
static uint64_t affine_input(int r, int i) {
  return ((uint64_t)(2u * (unsigned)r + 3u + 2u * (unsigned)i) << 32) | (uint32_t)(5 * r + i + 1);
}

static void collectives(copse_comm* comm) {
  int r = -1, p = -1;
  OK(copse_comm_rank(comm, &r));
  OK(copse_comm_size(comm, &p));
  CHECK(r == rank && p == size, "rank %d of %d, expected %d of %d", r, p, rank, size);

  /* a progress report (feeds the arrival estimate), then allreduce, in place, double sum */
  OK(copse_edge(comm, 0.5));
  double d[3] = {rank + 0.5, 2.0 * rank, 1.0};
  OK(copse_allreduce(comm, MPI_IN_PLACE, d, 3, MPI_DOUBLE, MPI_SUM));
  CHECK(d[0] == size * (size - 1) / 2.0 + 0.5 * size && d[2] == size, "allreduce double sum");

  /* reduce to the last rank with a non-commutative operator */
  MPI_Op affine_op;
  MPI_Op_create(affine_fn, 0, &affine_op);
  uint64_t v[4], out[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) v[i] = affine_input(rank, i);
  OK(copse_reduce(comm, v, out, 4, MPI_UINT64_T, affine_op, size - 1));
  if (rank == size - 1)
    for (int i = 0; i < 4; ++i) {
      uint64_t expected = affine_input(0, i);
      for (int q = 1; q < size; ++q) expected = affine(expected, affine_input(q, i));
      CHECK(out[i] == expected, "reduce affine element %d", i);
    }

  /* bcast from the last rank */
  int64_t b[2] = {rank == size - 1 ? 42 : 0, rank == size - 1 ? -7 : 0};
  OK(copse_bcast(comm, b, 2, MPI_INT64_T, size - 1));
  CHECK(b[0] == 42 && b[1] == -7, "bcast");

  OK(copse_barrier(comm));

  /* allgather, out of place and in place */
  int mine = 10 * rank + 1;
  int* all = calloc((size_t)size, sizeof(int));
  OK(copse_allgather(comm, &mine, all, 1, MPI_INT));
  for (int q = 0; q < size; ++q) CHECK(all[q] == 10 * q + 1, "allgather block %d", q);
  memset(all, 0, sizeof(int) * (size_t)size);
  all[rank] = mine;
  OK(copse_allgather(comm, MPI_IN_PLACE, all, 1, MPI_INT));
  for (int q = 0; q < size; ++q) CHECK(all[q] == 10 * q + 1, "allgather in place block %d", q);

  /* reduce_scatter_block: 2 floats a rank; reduce_scatter: rank q gets q + 1 */
  float* f = malloc(sizeof(float) * (size_t)(2 * size));
  float g[2];
  for (int i = 0; i < 2 * size; ++i) f[i] = (float)(rank + i);
  OK(copse_reduce_scatter_block(comm, f, g, 2, MPI_FLOAT, MPI_MAX));
  CHECK(g[0] == (float)(size - 1 + 2 * rank) && g[1] == (float)(size + 2 * rank), "reduce_scatter_block max");
  int* counts = malloc(sizeof(int) * (size_t)size);
  int total = 0, offset = 0;
  for (int q = 0; q < size; ++q) {
    counts[q] = q + 1;
    if (q < rank) offset += counts[q];
    total += counts[q];
  }
  int* s = malloc(sizeof(int) * (size_t)total);
  for (int i = 0; i < total; ++i) s[i] = i;
  OK(copse_reduce_scatter(comm, MPI_IN_PLACE, s, counts, MPI_INT, MPI_SUM));
  for (int i = 0; i < counts[rank]; ++i) CHECK(s[i] == size * (offset + i), "reduce_scatter element %d", i);

  int rc;
  /* scatter from rank 0 (in place there), gather to the last rank (in place
   * there), alltoall out of place and in place: rank q's block for rank d is
   * 100 q + d */
  int* blocks = malloc(sizeof(int) * (size_t)size);
  int* back = malloc(sizeof(int) * (size_t)size);
  for (int q = 0; q < size; ++q) blocks[q] = 100 * rank + q;
  mine = -1;
  OK(copse_scatter(comm, blocks, rank == 0 ? MPI_IN_PLACE : &mine, 1, MPI_INT, 0));
  CHECK((rank == 0 ? blocks[0] : mine) == rank, "scatter: got %d", rank == 0 ? blocks[0] : mine);
  mine = 10 * rank + 1;
  memset(all, 0, sizeof(int) * (size_t)size);
  all[rank] = mine;
  OK(copse_gather(comm, rank == size - 1 ? MPI_IN_PLACE : &mine, all, 1, MPI_INT, size - 1));
  if (rank == size - 1)
    for (int q = 0; q < size; ++q) CHECK(all[q] == 10 * q + 1, "gather block %d", q);
  OK(copse_alltoall(comm, blocks, back, 1, MPI_INT));
  for (int q = 0; q < size; ++q) CHECK(back[q] == 100 * q + rank, "alltoall block %d: got %d", q, back[q]);
  for (int q = 0; q < size; ++q) blocks[q] = 100 * rank + q;
  OK(copse_alltoall(comm, MPI_IN_PLACE, blocks, 1, MPI_INT));
  for (int q = 0; q < size; ++q) CHECK(blocks[q] == 100 * q + rank, "alltoall in place block %d", q);
  rc = copse_scatter(comm, blocks, &mine, 1, MPI_INT, size); /* no such root: refused alike everywhere */
  CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "root"), "scatter root %d: %s: %s", size,
        copse_error_name(rc), copse_error_message());
  free(blocks);
  free(back);

  /* mistakes: each a code and a one-line message */
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_commit(&pair);
  int x[2] = {1, 2};
  rc = copse_allreduce(comm, MPI_IN_PLACE, x, 1, pair, MPI_SUM);
  CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "is not a datatype copse serves"),
        "derived datatype: %s: %s", copse_error_name(rc), copse_error_message());
  MPI_Type_free(&pair);
  rc = copse_allreduce(comm, MPI_IN_PLACE, x, 2, MPI_FLOAT, MPI_BAND);
  CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "operator is not one copse serves on MPI_FLOAT"),
        "band on float: %s: %s", copse_error_name(rc), copse_error_message());
  rc = copse_edge(comm, 1.5);
  CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "fraction"), "edge(1.5): %s: %s", copse_error_name(rc),
        copse_error_message());
  rc = copse_allreduce(NULL, x, x, 2, MPI_INT, MPI_SUM);
  CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "NULL"), "null comm: %s", copse_error_message());
  CHECK(strcmp(copse_error_name(COPSE_ERR_TIMEOUT), "COPSE_ERR_TIMEOUT") == 0 &&
            strcmp(copse_error_name(99), "unknown") == 0,
        "error names");

  MPI_Op_free(&affine_op);
  free(all);
  free(f);
  free(counts);
  free(s);
}

/* Two thread ranks per process: each thread sums its copse rank. */
struct thread_arg {
  copse_team* team;
  int thread;
  int result;
  int rc;
};
static void* thread_main(void* p) {
  struct thread_arg* a = p;
  copse_comm* comm = NULL;
  a->rc = copse_team_comm(a->team, a->thread, &comm);
  if (a->rc != COPSE_SUCCESS) return NULL;
  int r = 0;
  copse_comm_rank(comm, &r);
  a->result = r;
  a->rc = copse_allreduce(comm, MPI_IN_PLACE, &a->result, 1, MPI_INT, MPI_SUM);
  return NULL;
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  copse_team* team = NULL;
  copse_comm* comm = NULL;
  OK(copse_team_create(MPI_COMM_WORLD, 1, &team));
  OK(copse_team_comm(team, 0, &comm));
  int rc = copse_team_comm(team, 1, &comm);
  CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "thread 1 is not in [0, 1)"), "thread out of range: %s",
        copse_error_message());
  OK(copse_team_comm(team, 0, &comm));
  if (comm) collectives(comm);
  OK(copse_team_free(team));
  rc = copse_team_create(MPI_COMM_WORLD, 0, &team);
  CHECK(rc == COPSE_ERR_USAGE && team == NULL, "zero threads: %s", copse_error_message());

  /* hybrid: two thread ranks per process */
  copse_team* hybrid = NULL;
  OK(copse_team_create(MPI_COMM_WORLD, 2, &hybrid));
  if (hybrid) {
    pthread_t threads[2];
    struct thread_arg args[2] = {{hybrid, 0, 0, 0}, {hybrid, 1, 0, 0}};
    for (int t = 0; t < 2; ++t) pthread_create(&threads[t], NULL, thread_main, &args[t]);
    for (int t = 0; t < 2; ++t) pthread_join(threads[t], NULL);
    for (int t = 0; t < 2; ++t)
      CHECK(args[t].rc == COPSE_SUCCESS && args[t].result == (2 * size) * (2 * size - 1) / 2,
            "hybrid thread %d: %s, sum %d", t, copse_error_name(args[t].rc), args[t].result);
    OK(copse_team_free(hybrid));
  }

  /* a team still alive at MPI_Finalize: torn down there, freed after */
  copse_team* late = NULL;
  OK(copse_team_create(MPI_COMM_WORLD, 1, &late));
  MPI_Finalize();
  if (late) {
    copse_comm* late_comm = NULL;
    rc = copse_team_comm(late, 0, &late_comm);
    CHECK(rc == COPSE_ERR_USAGE && strstr(copse_error_message(), "torn down by MPI_Finalize"),
          "a team after MPI_Finalize: %s", copse_error_message());
    OK(copse_team_free(late));
  }
  if (failures) fprintf(stderr, "rank %d: %d failures\n", rank, failures);
  return failures ? 1 : 0;
}
