/* A plain MPI program -- no copse header, built with the MPI C compiler --
 * that calls the collectives libcopse_mpi.so serves (the v-variants:
 * collectives_vector.c), checks every
 * result against a sequential computation, and records which calls it
 * expects copse to serve and which to pass to the MPI library.
 *
 *   collectives EXPECT_FILE [--max-bytes N] [--not-served NAME]...
 *
 * --max-bytes and --not-served repeat the run's mpi.max_bytes and mpi.serve
 * (COPSE_MPI_MAX_BYTES, COPSE_MPI_SERVE), so the program knows what copse
 * should do with each call: serve it when the collective is served, the
 * datatype and operator are copse's, the communicator has more than one
 * process and the bytes are within bounds; pass it otherwise. At the end
 * every process appends the line
 *   {"rank": r, "served": {"allreduce": n, ...}, "passed": {...}}
 * to EXPECT_FILE (one write, O_APPEND), which tests/pmpi/run.sh compares with
 * the process's COPSE_MPI_STATS line. Exit status 0 if every result is right.
 */
#include <fcntl.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives.h"

static const char* const names[COLLECTIVES] = {
    "allreduce", "reduce",   "bcast",      "barrier", "allgather", "reduce_scatter_block", "reduce_scatter",
    "scatter",   "gather",   "alltoall",   "allgatherv", "gatherv", "scatterv",           "alltoallv"};

int world_rank, world_size, failures;
static long served[COLLECTIVES], passed[COLLECTIVES];
static int not_served[COLLECTIVES];
static long long max_bytes = -1; /* -1: no bound */

/* A failed check: one line on stderr, written whole. */
void report(int line, const char* format, ...) {
  char text[512];
  int n = snprintf(text, sizeof text, "rank %d: line %d: ", world_rank, line);
  va_list args;
  va_start(args, format);
  vsnprintf(text + n, sizeof text - (size_t)n, format, args);
  va_end(args);
  fprintf(stderr, "%s\n", text);
  ++failures;
}
int comm_size(MPI_Comm comm) {
  int p;
  MPI_Comm_size(comm, &p);
  return p;
}
int comm_rank(MPI_Comm comm) {
  int r;
  MPI_Comm_rank(comm, &r);
  return r;
}

/* One call about to be made: copse_can says whether its datatype and
 * operator are copse's; bytes are what each process contributes. */
void expect(int collective, MPI_Comm comm, int copse_can, long long bytes) {
  const int serves = copse_can && !not_served[collective] && comm_size(comm) > 1 &&
                     (collective == BARRIER || max_bytes < 0 || bytes <= max_bytes);
  if (serves)
    ++served[collective];
  else
    ++passed[collective];
}

/* ---------------------------------------------------------------- operators */

/* A non-commutative operator on uint64: (a, b) in the high and low 32 bits
 * stands for x -> a*x + b; x (op) y = "x, then y" = (a1*a2, a2*b1 + b2) mod
 * 2^32. MPI's user function computes inout = in (op) inout. */
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
static uint64_t affine_input(int rank, int i) {
  return ((uint64_t)(2u * (unsigned)rank + 3u + 2u * (unsigned)i) << 32) | (uint32_t)(7 * rank + i + 1);
}
/* The input of `rank` for element i, over `ranks` listed in communicator order. */
static uint64_t affine_reference(const int* ranks, int p, int i) {
  uint64_t acc = affine_input(ranks[0], i);
  for (int q = 1; q < p; ++q) acc = affine(acc, affine_input(ranks[q], i));
  return acc;
}

/* A commutative user operator on int: the larger absolute value, ties to the larger. */
static void absmax_fn(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* x = in;
  int* y = inout;
  for (int i = 0; i < *len; ++i) {
    const int ax = abs(x[i]), ay = abs(y[i]);
    if (ax > ay || (ax == ay && x[i] > y[i])) y[i] = x[i];
  }
}

/* Sums pairs of ints (a derived datatype of two ints). */
static void pair_sum_fn(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* x = in;
  int* y = inout;
  for (int i = 0; i < 2 * *len; ++i) y[i] += x[i];
}

/* The world ranks of comm's members, in comm's order. */
int* members(MPI_Comm comm) {
  const int p = comm_size(comm);
  int* world = malloc(sizeof(int) * (size_t)p);
  MPI_Group group, world_group;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int* mine = malloc(sizeof(int) * (size_t)p);
  for (int i = 0; i < p; ++i) mine[i] = i;
  MPI_Group_translate_ranks(group, p, mine, world_group, world);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  free(mine);
  return world;
}

/* ---------------------------------------------------------------- the checks */

int input(int world, int i) { return (world * 37 + i * 11) % 101 - 50; }

/* allreduce, reduce, reduce_scatter(_block) with MPI_SUM on int and the
 * non-commutative affine operator, in and out of place, on `comm`. */
static void reductions(MPI_Comm comm, MPI_Op affine_op, const char* label) {
  const int p = comm_size(comm), r = comm_rank(comm);
  int* world = members(comm);
  const int counts[] = {0, 1, p - 1, p + 1, 1000};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
    const int n = counts[k];
    int* in = malloc(sizeof(int) * (size_t)(n + 1));
    int* out = malloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; ++i) in[i] = input(world_rank, i);
    expect(ALLREDUCE, comm, 1, 4LL * n);
    MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < n; ++i) {
      int sum = 0;
      for (int q = 0; q < p; ++q) sum += input(world[q], i);
      CHECK(out[i] == sum, "%s: allreduce sum count %d element %d: got %d, expected %d", label, n, i, out[i], sum);
    }
    /* in place, with the non-commutative operator */
    uint64_t* v = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    for (int i = 0; i < n; ++i) v[i] = affine_input(world_rank, i);
    expect(ALLREDUCE, comm, 1, 8LL * n);
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, affine_op, comm);
    for (int i = 0; i < n; ++i)
      CHECK(v[i] == affine_reference(world, p, i), "%s: allreduce affine in place count %d element %d", label, n, i);

    /* reduce with the affine operator to the last rank, then in place with sum to rank 1 % p */
    const int root = p - 1;
    free(v);
    uint64_t* w = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    for (int i = 0; i < n; ++i) w[i] = affine_input(world_rank, i);
    uint64_t* red = malloc(sizeof(uint64_t) * (size_t)(n + 1));
    expect(REDUCE, comm, 1, 8LL * n);
    MPI_Reduce(w, red, n, MPI_UINT64_T, affine_op, root, comm);
    if (r == root)
      for (int i = 0; i < n; ++i)
        CHECK(red[i] == affine_reference(world, p, i), "%s: reduce affine to %d count %d element %d", label, root, n,
              i);
    const int root2 = 1 % p;
    for (int i = 0; i < n; ++i) in[i] = input(world_rank, i);
    expect(REDUCE, comm, 1, 4LL * n);
    if (r == root2)
      MPI_Reduce(MPI_IN_PLACE, in, n, MPI_INT, MPI_SUM, root2, comm);
    else
      MPI_Reduce(in, NULL, n, MPI_INT, MPI_SUM, root2, comm);
    if (r == root2)
      for (int i = 0; i < n; ++i) {
        int sum = 0;
        for (int q = 0; q < p; ++q) sum += input(world[q], i);
        CHECK(in[i] == sum, "%s: reduce in place to %d count %d element %d: got %d, expected %d", label, root2, n, i,
              in[i], sum);
      }
    free(w);
    free(red);
    free(in);
    free(out);
  }

  /* reduce_scatter_block: 3 elements a rank, out of place with sum, in place with affine */
  {
    const int b = 3;
    int* in = malloc(sizeof(int) * (size_t)(b * p));
    int out[3];
    for (int i = 0; i < b * p; ++i) in[i] = input(world_rank, i);
    expect(REDUCE_SCATTER_BLOCK, comm, 1, 4LL * b * p);
    MPI_Reduce_scatter_block(in, out, b, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < b; ++i) {
      int sum = 0;
      for (int q = 0; q < p; ++q) sum += input(world[q], r * b + i);
      CHECK(out[i] == sum, "%s: reduce_scatter_block element %d: got %d, expected %d", label, i, out[i], sum);
    }
    uint64_t* v = malloc(sizeof(uint64_t) * (size_t)(b * p));
    for (int i = 0; i < b * p; ++i) v[i] = affine_input(world_rank, i);
    expect(REDUCE_SCATTER_BLOCK, comm, 1, 8LL * b * p);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, v, b, MPI_UINT64_T, affine_op, comm);
    for (int i = 0; i < b; ++i)
      CHECK(v[i] == affine_reference(world, p, r * b + i), "%s: reduce_scatter_block affine in place element %d", label,
            i);
    free(v);
    free(in);
  }

  /* reduce_scatter: rank q gets q % 3 elements (some none), sum out of place, affine in place */
  {
    int* counts_q = malloc(sizeof(int) * (size_t)p);
    int total = 0, offset = 0;
    for (int q = 0; q < p; ++q) {
      counts_q[q] = q % 3;
      if (q < r) offset += counts_q[q];
      total += counts_q[q];
    }
    int* in = malloc(sizeof(int) * (size_t)(total + 1));
    int out[3];
    for (int i = 0; i < total; ++i) in[i] = input(world_rank, i);
    expect(REDUCE_SCATTER, comm, 1, 4LL * total);
    MPI_Reduce_scatter(in, out, counts_q, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < counts_q[r]; ++i) {
      int sum = 0;
      for (int q = 0; q < p; ++q) sum += input(world[q], offset + i);
      CHECK(out[i] == sum, "%s: reduce_scatter element %d: got %d, expected %d", label, i, out[i], sum);
    }
    uint64_t* v = malloc(sizeof(uint64_t) * (size_t)(total + 1));
    for (int i = 0; i < total; ++i) v[i] = affine_input(world_rank, i);
    expect(REDUCE_SCATTER, comm, 1, 8LL * total);
    MPI_Reduce_scatter(MPI_IN_PLACE, v, counts_q, MPI_UINT64_T, affine_op, comm);
    for (int i = 0; i < counts_q[r]; ++i)
      CHECK(v[i] == affine_reference(world, p, offset + i), "%s: reduce_scatter affine in place element %d", label, i);
    free(v);
    free(in);
    free(counts_q);
  }
  free(world);
}

/* scatter (from the middle rank), gather (to the last) and alltoall on
 * `comm`, out of place and in place (at the root), and alltoall and gather
 * (in place) into a derived receive type (one "pair of ints" a block, spaced
 * by 3). Rank s's
 * block for rank d is (input(s, 2d), input(s, 2d + 1)); a gather's is
 * (input(s, 0), input(s, 1)). */
static void scatter_gather_alltoall(MPI_Comm comm, const char* label) {
  const int p = comm_size(comm), r = comm_rank(comm), root = p / 2;
  int* world = members(comm);
  int *all = malloc(sizeof(int) * (size_t)(3 * p)), *send = malloc(sizeof(int) * (size_t)(2 * p)), mine[2];
  for (int i = 0; i < 2 * p; ++i) send[i] = input(world_rank, i);
  for (int in_place = 0; in_place < 2; ++in_place) {
    const char* how = in_place ? " in place" : "";
    mine[0] = mine[1] = -7;
    expect(SCATTER, comm, 1, 8);
    if (in_place && r == root)
      MPI_Scatter(send, 2, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm);
    else
      MPI_Scatter(send, 2, MPI_INT, mine, 2, MPI_INT, root, comm);
    for (int i = 0; i < 2; ++i) {
      const int got = in_place && r == root ? send[2 * r + i] : mine[i];
      CHECK(got == input(world[root], 2 * r + i), "%s: scatter%s element %d: got %d", label, how, i, got);
    }
    for (int i = 0; i < 2 * p; ++i) all[i] = i / 2 == r ? send[i % 2] : -7;
    expect(GATHER, comm, 1, 8);
    MPI_Gather(in_place && r == p - 1 ? MPI_IN_PLACE : send, 2, MPI_INT, all, 2, MPI_INT, p - 1, comm);
    for (int q = 0; r == p - 1 && q < 2 * p; ++q)
      CHECK(all[q] == input(world[q / 2], q % 2), "%s: gather%s element %d", label, how, q);
    for (int i = 0; i < 2 * p; ++i) all[i] = in_place ? send[i] : -7;
    expect(ALLTOALL, comm, 1, 8); /* one block */
    MPI_Alltoall(in_place ? MPI_IN_PLACE : send, 2, MPI_INT, all, 2, MPI_INT, comm);
    for (int q = 0; q < 2 * p; ++q)
      CHECK(all[q] == input(world[q / 2], 2 * r + q % 2), "%s: alltoall%s element %d", label, how, q);
  }
  MPI_Datatype pair, spaced;
  MPI_Type_contiguous(2, MPI_INT, &pair);
  MPI_Type_create_resized(pair, 0, 3 * (MPI_Aint)sizeof(int), &spaced);
  MPI_Type_commit(&spaced);
  for (int i = 0; i < 3 * p; ++i) all[i] = -7;
  expect(ALLTOALL, comm, 1, 8); /* one block */
  MPI_Alltoall(send, 2, MPI_INT, all, 1, spaced, comm);
  for (int q = 0; q < 3 * p; ++q)
    CHECK(all[q] == (q % 3 == 2 ? -7 : input(world[q / 3], 2 * r + q % 3)), "%s: alltoall spaced element %d", label, q);
  for (int i = 0; i < 3 * p; ++i) all[i] = i / 3 == r && i % 3 < 2 ? send[i % 3] : -7; /* the root's in place */
  expect(GATHER, comm, 1, 8);
  MPI_Gather(r == p - 1 ? MPI_IN_PLACE : send, 2, MPI_INT, all, 1, spaced, p - 1, comm);
  for (int q = 0; r == p - 1 && q < 3 * p; ++q)
    CHECK(all[q] == (q % 3 == 2 ? -7 : input(world[q / 3], q % 3)), "%s: gather spaced element %d", label, q);
  MPI_Type_free(&spaced);
  MPI_Type_free(&pair);
  free(send);
  free(all);
  free(world);
}

/* bcast and allgather on `comm`, with named and derived datatypes. */
static void movements(MPI_Comm comm, const char* label) {
  const int p = comm_size(comm), r = comm_rank(comm);
  int* world = members(comm);
  /* bcast from the last rank */
  {
    int v[100];
    for (int i = 0; i < 100; ++i) v[i] = r == p - 1 ? input(world_rank, i) : -1;
    expect(BCAST, comm, 1, 400);
    MPI_Bcast(v, 100, MPI_INT, p - 1, comm);
    for (int i = 0; i < 100; ++i)
      CHECK(v[i] == input(world[p - 1], i), "%s: bcast element %d: got %d, expected %d", label, i, v[i],
            input(world[p - 1], i));
  }
  /* bcast of the same 3 ints described differently: every other int of the
   * root's buffer (a vector type), three plain ints elsewhere */
  {
    const int root = p / 2;
    int strided[6] = {0, -1, 0, -1, 0, -1}, plain[3] = {-1, -1, -1};
    MPI_Datatype every_other;
    MPI_Type_vector(3, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    expect(BCAST, comm, 1, 12);
    if (r == root) {
      for (int i = 0; i < 3; ++i) strided[2 * i] = 10 * world_rank + i;
      MPI_Bcast(strided, 1, every_other, root, comm);
    } else {
      MPI_Bcast(plain, 3, MPI_INT, root, comm);
      for (int i = 0; i < 3; ++i)
        CHECK(plain[i] == 10 * world[root] + i, "%s: bcast vector->int element %d: got %d", label, i, plain[i]);
    }
    MPI_Type_free(&every_other);
  }
  /* allgather: 2 ints a rank out of place, then in place, then into a
   * derived receive type (one "pair of ints" a rank, spaced by 3 ints) */
  {
    int mine[2] = {input(world_rank, 0), input(world_rank, 1)};
    int* all = malloc(sizeof(int) * (size_t)(3 * p));
    expect(ALLGATHER, comm, 1, 8);
    MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm);
    for (int q = 0; q < p; ++q)
      for (int i = 0; i < 2; ++i)
        CHECK(all[2 * q + i] == input(world[q], i), "%s: allgather block %d element %d", label, q, i);
    for (int i = 0; i < 2 * p; ++i) all[i] = -7;
    all[2 * r] = mine[0];
    all[2 * r + 1] = mine[1];
    expect(ALLGATHER, comm, 1, 8);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, comm);
    for (int q = 0; q < p; ++q)
      for (int i = 0; i < 2; ++i)
        CHECK(all[2 * q + i] == input(world[q], i), "%s: allgather in place block %d element %d", label, q, i);
    MPI_Datatype pair, spaced;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_create_resized(pair, 0, 3 * (MPI_Aint)sizeof(int), &spaced);
    MPI_Type_commit(&spaced);
    for (int i = 0; i < 3 * p; ++i) all[i] = -7;
    expect(ALLGATHER, comm, 1, 8);
    MPI_Allgather(mine, 2, MPI_INT, all, 1, spaced, comm);
    for (int q = 0; q < p; ++q) {
      for (int i = 0; i < 2; ++i)
        CHECK(all[3 * q + i] == input(world[q], i), "%s: allgather spaced block %d element %d", label, q, i);
      CHECK(all[3 * q + 2] == -7, "%s: allgather spaced wrote into the gap of block %d", label, q);
    }
    MPI_Type_free(&spaced);
    MPI_Type_free(&pair);
    free(all);
  }
  expect(BARRIER, comm, 1, 0);
  MPI_Barrier(comm);
  free(world);
  scatter_gather_alltoall(comm, label);
}

/* On MPI_COMM_WORLD: datatypes and operators, bitwise agreement. */
static void world_datatypes_and_operators(void) {
  const MPI_Comm comm = MPI_COMM_WORLD;
  const int p = world_size;
  /* MPI_CHAR with MPI_SUM wraps around in 8 bits */
  {
    char c[4];
    for (int i = 0; i < 4; ++i) c[i] = (char)(100 + world_rank + i);
    char sum[4];
    expect(ALLREDUCE, comm, 1, 4);
    MPI_Allreduce(c, sum, 4, MPI_CHAR, MPI_SUM, comm);
    for (int i = 0; i < 4; ++i) {
      unsigned expected = 0;
      for (int q = 0; q < p; ++q) expected += (unsigned)(100 + q + i);
      CHECK((unsigned char)sum[i] == (expected & 0xffu), "MPI_CHAR sum element %d: got %u, expected %u", i,
            (unsigned)(unsigned char)sum[i], expected & 0xffu);
    }
  }
  /* double max; float sums of inexact values, bitwise the same on every rank */
  {
    double d[5], dmax[5];
    for (int i = 0; i < 5; ++i) d[i] = (double)input(world_rank, i) / 3.0;
    expect(ALLREDUCE, comm, 1, 40);
    MPI_Allreduce(d, dmax, 5, MPI_DOUBLE, MPI_MAX, comm);
    for (int i = 0; i < 5; ++i) {
      double m = (double)input(0, i) / 3.0;
      for (int q = 1; q < p; ++q)
        if ((double)input(q, i) / 3.0 > m) m = (double)input(q, i) / 3.0;
      CHECK(dmax[i] == m, "double max element %d", i);
    }
    float f[257], fsum[257], root_sum[257];
    for (int i = 0; i < 257; ++i) f[i] = 1.0f / (float)(world_rank + i + 3);
    expect(ALLREDUCE, comm, 1, 4 * 257);
    MPI_Allreduce(f, fsum, 257, MPI_FLOAT, MPI_SUM, comm);
    memcpy(root_sum, fsum, sizeof fsum);
    expect(BCAST, comm, 1, 4 * 257);
    MPI_Bcast(root_sum, 257, MPI_FLOAT, 0, comm);
    CHECK(memcmp(root_sum, fsum, sizeof fsum) == 0, "float allreduce differs from rank 0's, bitwise");
    for (int i = 0; i < 257; ++i) {
      double exact = 0;
      for (int q = 0; q < p; ++q) exact += 1.0 / (q + i + 3);
      CHECK(fsum[i] > exact * 0.9999 && fsum[i] < exact * 1.0001, "float sum element %d: got %g, expected %g", i,
            (double)fsum[i], exact);
    }
  }
  /* int64 bitwise and logical operators, and a commutative user operator */
  {
    long long x[3] = {world_rank + 1, ~(1LL << world_rank), (long long)world_rank % 2}, y[3];
    expect(ALLREDUCE, comm, 1, 24);
    MPI_Allreduce(x, y, 3, MPI_LONG_LONG, MPI_BAND, comm);
    long long band = -1;
    for (int q = 0; q < p; ++q) band &= q + 1;
    CHECK(y[0] == band, "band: got %lld, expected %lld", y[0], band);
    expect(ALLREDUCE, comm, 1, 24);
    MPI_Allreduce(x, y, 3, MPI_LONG_LONG, MPI_LOR, comm);
    CHECK(y[2] == (p > 1), "lor: got %lld", y[2]);
    MPI_Op absmax;
    MPI_Op_create(absmax_fn, 1, &absmax);
    int v = world_rank % 2 ? -(world_rank + 1) : world_rank, m;
    expect(ALLREDUCE, comm, 1, 4);
    MPI_Allreduce(&v, &m, 1, MPI_INT, absmax, comm);
    int expected = 0;
    for (int q = 0; q < p; ++q) {
      const int vq = q % 2 ? -(q + 1) : q;
      if (abs(vq) > abs(expected) || (abs(vq) == abs(expected) && vq > expected)) expected = vq;
    }
    CHECK(m == expected, "user absmax: got %d, expected %d", m, expected);
    MPI_Op_free(&absmax);
    /* A new operator may reuse the freed handle: copse must not keep the old one. */
    MPI_Op again;
    MPI_Op_create(affine_fn, 0, &again);
    uint64_t a = affine_input(world_rank, 5), b;
    expect(ALLREDUCE, comm, 1, 8);
    MPI_Allreduce(&a, &b, 1, MPI_UINT64_T, again, comm);
    int* world = members(comm);
    CHECK(b == affine_reference(world, p, 5), "an operator created after MPI_Op_free");
    free(world);
    MPI_Op_free(&again);
  }
}

/* On MPI_COMM_WORLD: plans reused, sizes either side of the byte bound, and
 * calls passed to the MPI library. */
static void world_sizes_and_passed_calls(MPI_Op affine_op) {
  const MPI_Comm comm = MPI_COMM_WORLD;
  const int p = world_size;
  /* repeated calls of one shape (plans reused) */
  for (int k = 0; k < 5; ++k) {
    uint64_t v[7];
    for (int i = 0; i < 7; ++i) v[i] = affine_input(world_rank, i + k);
    expect(ALLREDUCE, comm, 1, 56);
    MPI_Allreduce(MPI_IN_PLACE, v, 7, MPI_UINT64_T, affine_op, comm);
    int* world = members(comm);
    for (int i = 0; i < 7; ++i) CHECK(v[i] == affine_reference(world, p, i + k), "repeat %d element %d", k, i);
    free(world);
  }
  /* one vector over 2^20 elements, served; one over the byte bound (if any), passed */
  {
    const int n = (1 << 20) + 3;
    int* v = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; ++i) v[i] = world_rank + i % 7;
    expect(ALLREDUCE, comm, 1, 4LL * n);
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT, MPI_SUM, comm);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += v[i] != p * (p - 1) / 2 + p * (i % 7);
    CHECK(bad == 0, "allreduce of 2^20+3 ints: %d elements wrong", bad);
    free(v);
    if (max_bytes >= 0) {
      const long long m = max_bytes / 4 + 1;
      int* w = malloc(sizeof(int) * (size_t)m);
      for (long long i = 0; i < m; ++i) w[i] = 1;
      expect(ALLREDUCE, comm, 1, 4 * m);
      MPI_Allreduce(MPI_IN_PLACE, w, (int)m, MPI_INT, MPI_SUM, comm);
      CHECK(w[0] == p && w[m - 1] == p, "allreduce over the byte bound");
      free(w);
    }
  }
  /* passed to the MPI library: a derived datatype (with a user operator:
   * MPI defines its own on predefined datatypes only), and MPI_MAXLOC on pairs */
  {
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op pair_sum;
    MPI_Op_create(pair_sum_fn, 1, &pair_sum);
    int v[4] = {world_rank, 1, 2 * world_rank, 3}, s[4];
    expect(ALLREDUCE, comm, 0, 16);
    MPI_Allreduce(v, s, 2, pair, pair_sum, comm);
    CHECK(s[0] == p * (p - 1) / 2 && s[1] == p && s[2] == p * (p - 1) && s[3] == 3 * p,
          "allreduce of a derived datatype");
    MPI_Op_free(&pair_sum);
    MPI_Type_free(&pair);
    struct {
      int value, rank;
    } in = {(world_rank * 7) % 5, world_rank}, out;
    expect(ALLREDUCE, comm, 0, 8);
    MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, comm);
    int best = -1, where = -1;
    for (int q = 0; q < p; ++q)
      if ((q * 7) % 5 > best) best = (q * 7) % 5, where = q;
    CHECK(out.value == best && out.rank == where, "maxloc: got (%d, %d)", out.value, out.rank);
  }
}

/* Cases copse serves on MPI_COMM_WORLD only: datatypes, operators, sizes. */
static void world_only(MPI_Op affine_op) {
  world_datatypes_and_operators();
  world_sizes_and_passed_calls(affine_op);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: collectives EXPECT_FILE [--max-bytes N] [--not-served NAME]...\n");
    return 2;
  }
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--max-bytes") == 0) {
      max_bytes = atoll(argv[i + 1]);
    } else if (strcmp(argv[i], "--not-served") == 0) {
      int found = 0;
      for (int c = 0; c < COLLECTIVES; ++c)
        if (strcmp(argv[i + 1], names[c]) == 0) not_served[c] = found = 1;
      if (!found) return 2;
    } else {
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Op affine_op;
  MPI_Op_create(affine_fn, 0, &affine_op);

  reductions(MPI_COMM_WORLD, affine_op, "world");
  movements(MPI_COMM_WORLD, "world");
  vector_collectives(MPI_COMM_WORLD, "world");
  world_only(affine_op);

  /* the world in reverse order: rank order matters to the affine operator */
  MPI_Comm reversed, copy, half;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &reversed);
  reductions(reversed, affine_op, "reversed");
  movements(reversed, "reversed");
  vector_collectives(reversed, "reversed");
  MPI_Comm_free(&reversed);
  /* a duplicate, freed and made again (its Team goes with it) */
  for (int k = 0; k < 2; ++k) {
    MPI_Comm_dup(MPI_COMM_WORLD, &copy);
    reductions(copy, affine_op, "dup");
    MPI_Comm_free(&copy);
  }
  /* halves: even and odd ranks (one process each at p = 2, 3: passed) */
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
  movements(half, "half");
  MPI_Comm_free(&half);
  MPI_Op_free(&affine_op);

  /* the expectation line, written whole */
  char line[1024];
  int len = snprintf(line, sizeof line, "{\"rank\": %d, \"served\": {", world_rank);
  for (int c = 0; c < COLLECTIVES; ++c)
    len += snprintf(line + len, sizeof line - (size_t)len, "%s\"%s\": %ld", c ? ", " : "", names[c], served[c]);
  len += snprintf(line + len, sizeof line - (size_t)len, "}, \"passed\": {");
  for (int c = 0; c < COLLECTIVES; ++c)
    len += snprintf(line + len, sizeof line - (size_t)len, "%s\"%s\": %ld", c ? ", " : "", names[c], passed[c]);
  len += snprintf(line + len, sizeof line - (size_t)len, "}}\n");
  const int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0 || write(fd, line, (size_t)len) != len) {
    perror(argv[1]);
    ++failures;
  }
  if (fd >= 0) close(fd);

  MPI_Finalize();
  if (failures) fprintf(stderr, "rank %d: %d failures\n", world_rank, failures);
  return failures ? 1 : 0;
}
