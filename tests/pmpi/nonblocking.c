/* A plain MPI program -- no copse header -- that calls the nonblocking and
 * persistent collectives libcopse_mpi.so serves, checks every result against
 * a sequential computation, and records which calls it expects copse to
 * serve (tests/pmpi/nonblocking.sh compares them with the stats file):
 *
 *   nonblocking EXPECT_FILE
 *
 * With NONBLOCKING_THREADS=1 in its environment it asks for
 * MPI_THREAD_MULTIPLE (copse then locks its progress and never waits for
 * one request alone), runs the same, and then two threads at once, each
 * with nonblocking and persistent calls of its own communicator, and a
 * blocking collective in one thread while another tests the same
 * communicator's nonblocking call.
 *
 * Covers counts 0, 1, p-1, p+1, 1000 and over 2^20 bytes, roots other than
 * 0, in place, several calls outstanding on one communicator and on two,
 * MPI_Waitall / MPI_Testall / MPI_Waitany mixing copse's and the library's
 * requests, MPI_Testany / MPI_Testsome / MPI_Waitsome / MPI_Request_get_status
 * on copse's requests beside the library's, MPI_Cancel refused, MPI_Test loops, MPI_Request_free on a running call, a blocking
 * collective after outstanding ones, a wait that must progress another
 * communicator's running call (waited for later, or freed), more requests
 * outstanding than the first chunk of copse's request slots holds, a start that must not wait for its
 * peers (rank 0: Ibarrier, Send; rank 1: Recv, Ibarrier), and persistent
 * calls of every collective (MPIX_*_init, nonblocking_persistent.c) whose
 * starts and waits allocate nothing (operator new, counted here: the
 * executable's definition is the process's); the nonblocking and persistent
 * v-variants likewise (nonblocking_vector.c). */
#include <execinfo.h>
#include <fcntl.h>
#include <mpi.h>
#include <mpi-ext.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nonblocking.h"

/* ---- counting copse's allocations (C++ operator new) ---- */
volatile long news;
/* While set (watch_news), each operator new also prints where it was called
 * from (the first few): a failed "no allocation" check then names the code
 * that allocated, which a rare, timing-dependent one needs. */
static volatile int watching;
void watch_news(int on) { watching = on; }
void* _Znwm(size_t n) { /* operator new(size_t) */
  ++news;
  static _Atomic int traced; /* operator new runs on any of the program's threads */
  if (watching && traced++ < 4) {
    void* frames[32];
    fprintf(stderr, "rank %d: operator new(%zu) while none was expected, from:\n", rank, n);
    backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
  }
  void* p = malloc(n ? n : 1);
  if (!p) abort();
  return p;
}
void* _Znam(size_t n) { return _Znwm(n); } /* operator new[] */

const char* const names[KINDS] = {"allreduce", "reduce",     "bcast",   "barrier",  "allgather", "reduce_scatter_block",
                                  "reduce_scatter", "scatter", "gather", "alltoall", "allgatherv", "gatherv",
                                  "scatterv", "alltoallv"};
long served[KINDS], persistent_served[KINDS];
int rank, size;
_Atomic int failures; /* CHECK from the threads of threads_at_once too */

int64_t value(int r, long i, int salt) { return (int64_t)(r + 1) * 1000003 + i * 7 + salt; }
int64_t sum_of(int p, long i, int salt) {
  int64_t s = 0;
  for (int r = 0; r < p; ++r) s += value(r, i, salt);
  return s;
}
int64_t* vec(long n) { return malloc((size_t)(n ? n : 1) * sizeof(int64_t)); }
void fill(int64_t* v, long n, int r, int salt) {
  for (long i = 0; i < n; ++i) v[i] = value(r, i, salt);
}
void check_sum(const int64_t* got, long n, int p, int salt, int line) {
  for (long i = 0; i < n; ++i)
    if (got[i] != sum_of(p, i, salt)) {
      fprintf(stderr, "rank %d: line %d: element %ld of %ld: %lld, expected %lld\n", rank, line, i, n,
              (long long)got[i], (long long)sum_of(p, i, salt));
      ++failures;
      return;
    }
}
int blocks_ok(const int64_t* got, int p, long n, int salt) {
  for (int v = 0; v < p; ++v)
    for (long i = 0; i < n; ++i)
      if (got[(long)v * n + i] != value(v, i, salt)) return 0;
  return 1;
}
static int cmp_size(MPI_Comm c) { int p; MPI_Comm_size(c, &p); return p; }
static int cmp_rank(MPI_Comm c) { int r; MPI_Comm_rank(c, &r); return r; }
/* A served call on this communicator (copse serves communicators of more than one process). */
static void expect(int kind, MPI_Comm c) { if (cmp_size(c) > 1) ++served[kind]; }

/* Every collective at one count, started together (outstanding at once) and
 * finished by one MPI_Waitall, with a ring exchange of the library's. */
static void all_at(MPI_Comm comm, long n, int salt) {
  const int p = cmp_size(comm), me = cmp_rank(comm), root = p - 1;
  int64_t *in = vec(n), *sum = vec(n), *red = vec(n), *bc = vec(n), *gath = vec(n * p), *rsin = vec(n * p),
          *rs = vec(n), *inplace = vec(n), *scin = vec(n * p), *scout = vec(n), *gaout = vec(n * p),
          *a2in = vec(n * p), *a2out = vec(n * p), *a2self = vec(n * p), *scin2 = vec(n * p), *scout2 = vec(n),
          *gain2 = vec(n), *gaout2 = vec(n * p), *rvin = vec(p * (n + p)), *rv = vec(n + p);
  /* MPI_Ireduce_scatter: rank v gets n + v elements, every third rank none; block v is value(., ., salt + 100 + v). */
  int* counts = malloc((size_t)p * sizeof(int));
  long at = 0;
  for (int v = 0; v < p; ++v) counts[v] = v % 3 == 1 ? 0 : (int)n + v;
  for (int v = 0; v < p; ++v) fill(rvin + at, counts[v], me, salt + 100 + v), at += counts[v];
  fill(in, n, me, salt);
  fill(inplace, n, me, salt + 1);
  for (long i = 0; i < n; ++i) bc[i] = me == root ? value(root, i, salt + 2) : -1;
  for (int v = 0; v < p; ++v) fill(rsin + (long)v * n, n, me, salt + 3 + v);
  /* scatter from the root: block v is value(v, ., salt + 50); alltoall: the block for v is value(me, ., salt + 60 + v),
   * in place value(me, ., salt + 70 + v). */
  for (int v = 0; v < p; ++v) fill(scin + (long)v * n, n, v, salt + 50);
  for (int v = 0; v < p; ++v) fill(a2in + (long)v * n, n, me, salt + 60 + v), fill(a2self + (long)v * n, n, me, salt + 70 + v);
  /* In place at the root: its scatter block stays in scin2, its gather block is already in gaout2. */
  for (int v = 0; v < p; ++v) fill(scin2 + (long)v * n, n, v, salt + 80);
  fill(gain2, n, me, salt + 90);
  if (me == root) fill(gaout2 + (long)root * n, n, root, salt + 90);
  int64_t ring_out = me, ring_in = -1;
  MPI_Request rq[16];
  MPI_Irecv(&ring_in, 1, MPI_INT64_T, (me + p - 1) % p, 7, comm, &rq[0]);
  MPI_Iallreduce(in, sum, (int)n, MPI_INT64_T, MPI_SUM, comm, &rq[1]);
  MPI_Ireduce(in, red, (int)n, MPI_INT64_T, MPI_SUM, root, comm, &rq[2]);
  MPI_Ibcast(bc, (int)n, MPI_INT64_T, root, comm, &rq[3]);
  MPI_Iallgather(in, (int)n, MPI_INT64_T, gath, (int)n, MPI_INT64_T, comm, &rq[4]);
  MPI_Ireduce_scatter_block(rsin, rs, (int)n, MPI_INT64_T, MPI_SUM, comm, &rq[5]);
  MPI_Iallreduce(MPI_IN_PLACE, inplace, (int)n, MPI_INT64_T, MPI_SUM, comm, &rq[6]);
  MPI_Ibarrier(comm, &rq[7]);
  MPI_Isend(&ring_out, 1, MPI_INT64_T, (me + 1) % p, 7, comm, &rq[8]);
  MPI_Iscatter(scin, (int)n, MPI_INT64_T, scout, (int)n, MPI_INT64_T, root, comm, &rq[9]);
  MPI_Igather(in, (int)n, MPI_INT64_T, gaout, (int)n, MPI_INT64_T, root, comm, &rq[10]);
  MPI_Ialltoall(a2in, (int)n, MPI_INT64_T, a2out, (int)n, MPI_INT64_T, comm, &rq[11]);
  MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a2self, (int)n, MPI_INT64_T, comm, &rq[12]);
  MPI_Iscatter(scin2, (int)n, MPI_INT64_T, me == root ? MPI_IN_PLACE : scout2, (int)n, MPI_INT64_T, root, comm, &rq[13]);
  MPI_Igather(me == root ? MPI_IN_PLACE : gain2, (int)n, MPI_INT64_T, gaout2, (int)n, MPI_INT64_T, root, comm, &rq[14]);
  MPI_Ireduce_scatter(rvin, rv, counts, MPI_INT64_T, MPI_SUM, comm, &rq[15]);
  expect(ALLREDUCE, comm), expect(ALLREDUCE, comm), expect(REDUCE, comm), expect(BCAST, comm);
  expect(ALLGATHER, comm), expect(RSB, comm), expect(BARRIER, comm);
  expect(SCATTER, comm), expect(GATHER, comm), expect(ALLTOALL, comm), expect(ALLTOALL, comm);
  expect(SCATTER, comm), expect(GATHER, comm), expect(RS, comm);
  MPI_Waitall(16, rq, MPI_STATUSES_IGNORE);
  for (int i = 0; i < 16; ++i) CHECK(rq[i] == MPI_REQUEST_NULL, "request %d not freed by MPI_Waitall", i);
  CHECK(ring_in == (me + p - 1) % p, "ring: %lld", (long long)ring_in);
  check_sum(sum, n, p, salt, __LINE__);
  check_sum(inplace, n, p, salt + 1, __LINE__);
  if (me == root) check_sum(red, n, p, salt, __LINE__);
  for (long i = 0; i < n; ++i)
    if (bc[i] != value(root, i, salt + 2)) { CHECK(0, "bcast n=%ld element %ld", n, i); break; }
  for (int v = 0; v < p; ++v)
    for (long i = 0; i < n; ++i)
      if (gath[(long)v * n + i] != value(v, i, salt)) { CHECK(0, "allgather n=%ld block %d element %ld", n, v, i); v = p; break; }
  check_sum(rs, n, p, salt + 3 + me, __LINE__);
  for (long i = 0; i < n; ++i)
    if (scout[i] != value(me, i, salt + 50)) { CHECK(0, "scatter n=%ld element %ld", n, i); break; }
  if (me == root) CHECK(blocks_ok(gaout, p, n, salt), "gather n=%ld", n);
  CHECK(blocks_ok(a2out, p, n, salt + 60 + me), "alltoall n=%ld", n);
  CHECK(blocks_ok(a2self, p, n, salt + 70 + me), "alltoall in place n=%ld", n);
  if (me == root)
    CHECK(blocks_ok(scin2, p, n, salt + 80), "scatter in place n=%ld: the root's send buffer changed", n);
  else
    for (long i = 0; i < n; ++i)
      if (scout2[i] != value(me, i, salt + 80)) { CHECK(0, "scatter (root in place) n=%ld element %ld", n, i); break; }
  if (me == root) CHECK(blocks_ok(gaout2, p, n, salt + 90), "gather in place n=%ld", n);
  check_sum(rv, counts[me], p, salt + 100 + me, __LINE__);
  free(in), free(sum), free(red), free(bc), free(gath), free(rsin), free(rs), free(inplace);
  free(scin), free(scout), free(gaout), free(a2in), free(a2out), free(a2self), free(scin2), free(scout2), free(gain2),
      free(gaout2), free(rvin), free(rv), free(counts);
}

/* An Iallreduce finished by an MPI_Test loop, one by MPI_Waitany among the
 * library's, one by MPI_Testall, one freed while running and completed by a
 * blocking collective after it. */
static void completions(MPI_Comm comm, long n) {
  const int p = cmp_size(comm), me = cmp_rank(comm);
  int64_t *in = vec(n), *a = vec(n), *b = vec(n), *c = vec(n);
  fill(in, n, me, 11);
  MPI_Request r;
  int flag = 0;
  MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, comm, &r);
  expect(ALLREDUCE, comm);
  while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  CHECK(r == MPI_REQUEST_NULL, "MPI_Test left the request");
  check_sum(a, n, p, 11, __LINE__);

  MPI_Request two[2];
  int64_t token = me, got = -1;
  MPI_Iallreduce(in, b, (int)n, MPI_INT64_T, MPI_SUM, comm, &two[0]);
  expect(ALLREDUCE, comm);
  MPI_Sendrecv(&token, 1, MPI_INT64_T, (me + 1) % p, 3, &got, 1, MPI_INT64_T, (me + p - 1) % p, 3, comm,
               MPI_STATUS_IGNORE);
  two[1] = MPI_REQUEST_NULL;
  int index = -1, done = 0;
  MPI_Waitany(2, two, &index, MPI_STATUS_IGNORE);
  CHECK(index == 0, "MPI_Waitany: index %d", index);
  check_sum(b, n, p, 11, __LINE__);

  MPI_Iallreduce(in, c, (int)n, MPI_INT64_T, MPI_SUM, comm, &two[0]);
  MPI_Ibarrier(comm, &two[1]);
  expect(ALLREDUCE, comm), expect(BARRIER, comm);
  while (!done) MPI_Testall(2, two, &done, MPI_STATUSES_IGNORE);
  CHECK(two[0] == MPI_REQUEST_NULL && two[1] == MPI_REQUEST_NULL, "MPI_Testall left requests");
  check_sum(c, n, p, 11, __LINE__);

  memset(a, 0, (size_t)(n ? n : 1) * sizeof *a);
  MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, comm, &r);
  expect(ALLREDUCE, comm);
  MPI_Request_free(&r);
  CHECK(r == MPI_REQUEST_NULL, "MPI_Request_free left the request");
  int64_t one = 1, all = 0;
  MPI_Allreduce(&one, &all, 1, MPI_INT64_T, MPI_SUM, comm); /* completes the freed call first */
  CHECK(all == p, "blocking allreduce after a freed one: %lld", (long long)all);
  check_sum(a, n, p, 11, __LINE__);
  free(in), free(a), free(b), free(c);
}

/* Rank 0: Ibarrier, Send to 1, Wait; rank 1: Recv from 0, Ibarrier, Wait --
 * deadlocks if a start waits for its peers. Run first, so that the start
 * also agrees on a plan no call has made yet (and again with an allreduce
 * of a count no other call uses). */
static void start_never_waits(void) {
  MPI_Request r;
  int token = 42;
  int64_t x[3] = {rank, rank, rank}, y[3] = {0, 0, 0};
  for (int kind = 0; kind < 2; ++kind) {
    if (rank == 0) {
      if (kind == 0) MPI_Ibarrier(MPI_COMM_WORLD, &r);
      else MPI_Iallreduce(x, y, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
      if (size > 1) MPI_Send(&token, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      if (rank == 1) MPI_Recv(&token, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (kind == 0) MPI_Ibarrier(MPI_COMM_WORLD, &r);
      else MPI_Iallreduce(x, y, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    expect(kind == 0 ? BARRIER : ALLREDUCE, MPI_COMM_WORLD);
  }
  CHECK(token == 42, "token %d", token);
  CHECK(y[2] == (int64_t)size * (size - 1) / 2, "allreduce after a Recv: %lld", (long long)y[2]);
}

/* Two communicators at once: calls outstanding on both, finished in an
 * order that is not the order started. */
static void two_communicators(void) {
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  /* Their Teams: made by a first blocking served call (a nonblocking start never makes one). */
  MPI_Barrier(half);
  MPI_Barrier(dup);
  const long n = 1001;
  int64_t *in = vec(n), *a = vec(n), *b = vec(n), *c = vec(n);
  fill(in, n, rank, 5);
  MPI_Request r[3];
  MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, dup, &r[0]);
  MPI_Iallreduce(in, b, (int)n, MPI_INT64_T, MPI_SUM, half, &r[1]);
  MPI_Iallreduce(in, c, (int)n, MPI_INT64_T, MPI_SUM, dup, &r[2]);
  expect(ALLREDUCE, dup), expect(ALLREDUCE, half), expect(ALLREDUCE, dup);
  MPI_Wait(&r[2], MPI_STATUS_IGNORE);
  MPI_Wait(&r[1], MPI_STATUS_IGNORE);
  MPI_Wait(&r[0], MPI_STATUS_IGNORE);
  check_sum(a, n, size, 5, __LINE__);
  check_sum(c, n, size, 5, __LINE__);
  for (long i = 0; i < n; ++i) {
    int64_t s = 0;
    for (int q = rank % 2; q < size; q += 2) s += value(q, i, 5);
    if (b[i] != s) { CHECK(0, "half allreduce element %ld", i); break; }
  }
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  free(in), free(a), free(b), free(c);
}

/* A wait progresses the other running copse calls, freed ones too: rank 0
 * waits for B (on a duplicate) before A (on comm), the others for A before
 * they start B -- so rank 0's wait for B must progress A, which
 * (1000 elements: not one shared-memory round) needs rank 0's steps. With
 * `freed`, rank 0 frees A instead of waiting for it; a blocking allreduce
 * on comm then completes it. */
static void waits_progress_others(MPI_Comm comm, int freed) {
  const int p = cmp_size(comm), me = cmp_rank(comm);
  const long n = 1000;
  MPI_Comm dup;
  MPI_Comm_dup(comm, &dup);
  MPI_Barrier(dup); /* its Team (a nonblocking start never makes one) */
  int64_t *in = vec(n), *a = vec(n), *b = vec(n);
  fill(in, n, me, 31);
  MPI_Request ra, rb;
  MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, comm, &ra);
  expect(ALLREDUCE, comm);
  if (me == 0) {
    MPI_Iallreduce(in, b, (int)n, MPI_INT64_T, MPI_SUM, dup, &rb);
    if (freed) MPI_Request_free(&ra);
    MPI_Wait(&rb, MPI_STATUS_IGNORE);
    if (!freed) MPI_Wait(&ra, MPI_STATUS_IGNORE);
  } else {
    MPI_Wait(&ra, MPI_STATUS_IGNORE);
    MPI_Iallreduce(in, b, (int)n, MPI_INT64_T, MPI_SUM, dup, &rb);
    MPI_Wait(&rb, MPI_STATUS_IGNORE);
  }
  expect(ALLREDUCE, dup);
  int64_t one = 1, all = 0;
  MPI_Allreduce(&one, &all, 1, MPI_INT64_T, MPI_SUM, comm); /* completes a freed A first */
  CHECK(all == p, "blocking allreduce after A: %lld", (long long)all);
  check_sum(a, n, p, 31, __LINE__);
  check_sum(b, n, p, 31, __LINE__);
  MPI_Comm_free(&dup);
  free(in), free(a), free(b);
}

/* More copse requests outstanding at once than the first chunk of request
 * slots holds (64), completed by one MPI_Waitall, then as many again one
 * at a time (the freed slots reused): every handle distinct, every result
 * right. */
static void many_outstanding(MPI_Comm comm) {
  enum { kMany = 150 };
  const int p = cmp_size(comm), me = cmp_rank(comm);
  int64_t in[kMany], out[kMany];
  MPI_Request r[kMany];
  for (int i = 0; i < kMany; ++i) in[i] = me + i, out[i] = -1;
  for (int i = 0; i < kMany; ++i) {
    MPI_Iallreduce(&in[i], &out[i], 1, MPI_INT64_T, MPI_SUM, comm, &r[i]);
    expect(ALLREDUCE, comm);
  }
  /* On one process copse leaves the calls to the library, whose coll/self
   * component hands every call of a single-process communicator the same
   * completed request (ompi_request_empty): distinct handles are copse's. */
  for (int i = 0; i < kMany && p > 1; ++i)
    for (int j = 0; j < i; ++j) CHECK(r[i] != r[j], "requests %d and %d share a handle", i, j);
  MPI_Waitall(kMany, r, MPI_STATUSES_IGNORE);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < kMany; ++i) {
      const int64_t want = (int64_t)p * (p - 1) / 2 + (int64_t)p * i;
      CHECK(out[i] == want, "outstanding allreduce %d: %lld, expected %lld", i, (long long)out[i], (long long)want);
      if (round == 0) {
        out[i] = -1;
        MPI_Iallreduce(&in[i], &out[i], 1, MPI_INT64_T, MPI_SUM, comm, &r[i]);
        expect(ALLREDUCE, comm);
        MPI_Wait(&r[i], MPI_STATUS_IGNORE);
        CHECK(r[i] == MPI_REQUEST_NULL, "MPI_Wait left request %d", i);
      }
    }
}

/* Under MPI_THREAD_MULTIPLE: two threads at once, each with its own
 * communicator, MPI_Iallreduce + MPI_Wait or an MPI_Test loop, then a
 * persistent allreduce started and waited for. */
struct worker {
  MPI_Comm comm;
  int salt;
  long served, persistent_served; /* added to the totals after the join */
};
static void* worker_main(void* arg) {
  struct worker* w = arg;
  const int p = cmp_size(w->comm), me = cmp_rank(w->comm);
  int64_t in[2], out[2];
  MPI_Request r;
  for (int i = 0; i < 200; ++i) {
    in[0] = me + i + w->salt, in[1] = 1, out[0] = out[1] = -1;
    MPI_Iallreduce(in, out, 2, MPI_INT64_T, MPI_SUM, w->comm, &r);
    w->served += p > 1;
    if (i % 2) {
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      int flag = 0;
      while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    }
    const int64_t want = (int64_t)p * (p - 1) / 2 + (int64_t)p * (i + w->salt);
    CHECK(out[0] == want && out[1] == p, "thread %d, allreduce %d: %lld %lld, expected %lld %d", w->salt, i,
          (long long)out[0], (long long)out[1], (long long)want, p);
  }
  MPIX_Allreduce_init(in, out, 2, MPI_INT64_T, MPI_SUM, w->comm, MPI_INFO_NULL, &r);
  w->persistent_served += p > 1;
  for (int i = 0; i < 200; ++i) {
    in[0] = me + i + w->salt, in[1] = 1, out[0] = out[1] = -1;
    MPI_Start(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    const int64_t want = (int64_t)p * (p - 1) / 2 + (int64_t)p * (i + w->salt);
    CHECK(out[0] == want && out[1] == p, "thread %d, persistent %d: %lld, expected %lld", w->salt, i,
          (long long)out[0], (long long)want);
  }
  MPI_Request_free(&r);
  return NULL;
}
static void threads_at_once(void) {
  struct worker w[2];
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t) {
    w[t] = (struct worker){MPI_COMM_NULL, 1000 * t, 0, 0};
    MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
    MPI_Barrier(w[t].comm); /* its Team (a nonblocking start never makes one) */
  }
  for (int t = 0; t < 2; ++t) pthread_create(&threads[t], NULL, worker_main, &w[t]);
  for (int t = 0; t < 2; ++t) {
    pthread_join(threads[t], NULL);
    served[ALLREDUCE] += w[t].served;
    persistent_served[ALLREDUCE] += w[t].persistent_served;
    MPI_Comm_free(&w[t].comm);
  }
}

/* Persistent allreduce: planned at init, then started and waited for with
 * new data each time, and no operator new after init. */
/* The other request calls on copse's requests beside the library's:
 * MPI_Request_get_status (progresses, never frees), MPI_Testany and
 * MPI_Testsome loops, MPI_Waitsome, and MPI_Cancel, which MPI forbids for
 * collectives (an error, the request still completes). */
static void other_request_calls(MPI_Comm comm, long n) {
  const int p = cmp_size(comm), me = cmp_rank(comm);
  int64_t *in = vec(n), *a = vec(n), *b = vec(n);
  fill(in, n, me, 21);
  MPI_Request r[3];
  int flag = 0, index = -1, outcount = 0, indices[3];
  int64_t token = me, got = -1;

  MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, comm, &r[0]);
  expect(ALLREDUCE, comm);
  while (!flag) MPI_Request_get_status(r[0], &flag, MPI_STATUS_IGNORE);
  CHECK(r[0] != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
  MPI_Wait(&r[0], MPI_STATUS_IGNORE);
  CHECK(r[0] == MPI_REQUEST_NULL, "MPI_Wait after MPI_Request_get_status left the request");
  check_sum(a, n, p, 21, __LINE__);

  /* Testany: the library's receive and copse's allreduce, a null between. */
  MPI_Irecv(&got, 1, MPI_INT64_T, (me + p - 1) % p, 5, comm, &r[0]);
  r[1] = MPI_REQUEST_NULL;
  MPI_Iallreduce(in, b, (int)n, MPI_INT64_T, MPI_SUM, comm, &r[2]);
  expect(ALLREDUCE, comm);
  MPI_Send(&token, 1, MPI_INT64_T, (me + 1) % p, 5, comm);
  int finished = 0, seen[3] = {0, 0, 0};
  while (finished < 2) {
    MPI_Testany(3, r, &index, &flag, MPI_STATUS_IGNORE);
    if (!flag) continue;
    CHECK(index == 0 || index == 2, "MPI_Testany: index %d", index);
    if (index == MPI_UNDEFINED) break;
    CHECK(!seen[index], "MPI_Testany: index %d twice", index);
    seen[index] = 1, ++finished;
  }
  MPI_Testany(3, r, &index, &flag, MPI_STATUS_IGNORE);
  CHECK(flag && index == MPI_UNDEFINED, "MPI_Testany with nothing active: flag %d index %d", flag, index);
  CHECK(got == (me + p - 1) % p, "receive beside a copse request: %lld", (long long)got);
  check_sum(b, n, p, 21, __LINE__);

  /* Testsome loop, then Waitsome, on the same mix. */
  for (int round = 0; round < 2; ++round) {
    memset(a, 0, (size_t)(n ? n : 1) * sizeof *a);
    got = -1;
    MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, comm, &r[0]);
    expect(ALLREDUCE, comm);
    MPI_Irecv(&got, 1, MPI_INT64_T, (me + p - 1) % p, 6, comm, &r[1]);
    r[2] = MPI_REQUEST_NULL;
    MPI_Send(&token, 1, MPI_INT64_T, (me + 1) % p, 6, comm);
    int total = 0;
    while (total < 2) {
      if (round == 0)
        MPI_Testsome(3, r, &outcount, indices, MPI_STATUSES_IGNORE);
      else
        MPI_Waitsome(3, r, &outcount, indices, MPI_STATUSES_IGNORE);
      CHECK(outcount != MPI_UNDEFINED, "%s: none active with two running", round ? "MPI_Waitsome" : "MPI_Testsome");
      if (outcount == MPI_UNDEFINED) break;
      for (int k = 0; k < outcount; ++k)
        CHECK(indices[k] == 0 || indices[k] == 1, "some: index %d", indices[k]);
      total += outcount;
    }
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "some: requests left");
    MPI_Testsome(3, r, &outcount, indices, MPI_STATUSES_IGNORE);
    CHECK(outcount == MPI_UNDEFINED, "MPI_Testsome with nothing active: %d", outcount);
    CHECK(got == (me + p - 1) % p, "some: receive %lld", (long long)got);
    check_sum(a, n, p, 21, __LINE__);
  }

  /* MPI_Cancel of copse's request (p > 1: one process goes to the library,
   * whose answer MPI leaves open): an error (errors return here), and the
   * call still completes. */
  if (p > 1) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Iallreduce(in, a, (int)n, MPI_INT64_T, MPI_SUM, comm, &r[0]);
    expect(ALLREDUCE, comm);
    CHECK(MPI_Cancel(&r[0]) != MPI_SUCCESS, "MPI_Cancel of a copse collective succeeded");
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    check_sum(a, n, p, 21, __LINE__);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_ARE_FATAL);
  }
  free(in), free(a), free(b);
}

/* Under MPI_THREAD_MULTIPLE: one thread starts an MPI_Iallreduce and tests
 * it in a loop while the other, told the call has started, makes a blocking
 * MPI_Allreduce on the same communicator (the calls' order is their starts'):
 * the blocking call finishes the outstanding one without racing the tests. */
struct tester {
  MPI_Comm comm;
  int64_t in, out;
  _Atomic int started;
};
static void* tester_main(void* arg) {
  struct tester* t = arg;
  MPI_Request r;
  MPI_Iallreduce(&t->in, &t->out, 1, MPI_INT64_T, MPI_SUM, t->comm, &r);
  t->started = 1;
  int flag = 0;
  while (!flag) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
  return NULL;
}
static void blocking_beside_tests(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Barrier(comm); /* its Team */
  const int p = cmp_size(comm), me = cmp_rank(comm);
  for (int i = 0; i < 100; ++i) {
    struct tester t = {comm, me + i, -1, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, tester_main, &t);
    while (!t.started) sched_yield();
    int64_t in = 2 * me + i, out = -1;
    MPI_Allreduce(&in, &out, 1, MPI_INT64_T, MPI_SUM, comm);
    pthread_join(thread, NULL);
    expect(ALLREDUCE, comm);
    const int64_t ranks = (int64_t)p * (p - 1) / 2;
    CHECK(t.out == ranks + (int64_t)p * i && out == 2 * ranks + (int64_t)p * i,
          "blocking beside tests %d: %lld and %lld, expected %lld and %lld", i, (long long)t.out, (long long)out,
          (long long)(ranks + (int64_t)p * i), (long long)(2 * ranks + (int64_t)p * i));
  }
  MPI_Comm_free(&comm);
}

int main(int argc, char** argv) {
  const char* threads = getenv("NONBLOCKING_THREADS");
  const int multiple = threads && strcmp(threads, "1") == 0;
  int provided = MPI_THREAD_SINGLE;
  if (multiple)
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else
    MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int p = size;
  start_never_waits();
  const long counts[] = {0, 1, p - 1, p + 1, 1000, (1L << 20) / 8 + 3};
  for (int k = 0; k < 6; ++k) all_at(MPI_COMM_WORLD, counts[k], k * 100);
  for (int k = 0; k < 6; ++k) vector_all(counts[k], k * 100);
  vector_deferred();
  completions(MPI_COMM_WORLD, 1000);
  completions(MPI_COMM_WORLD, (1L << 20) / 8 + 3);
  other_request_calls(MPI_COMM_WORLD, 1000);
  two_communicators();
  waits_progress_others(MPI_COMM_WORLD, 0);
  waits_progress_others(MPI_COMM_WORLD, 1);
  many_outstanding(MPI_COMM_WORLD);
  persistent(1);
  persistent((1L << 20) / 8 + 3);
  persistent_all(1);
  persistent_all(1000);
  vector_persistent(p + 1);
  vector_persistent((1L << 20) / 8 + 3);
  if (multiple) {
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE asked for, %d given", provided);
    if (provided == MPI_THREAD_MULTIPLE) threads_at_once(), blocking_beside_tests();
  }

  char line[2048];
  int at = snprintf(line, sizeof line, "{\"rank\": %d, \"nonblocking\": {", rank);
  for (int k = 0; k < KINDS; ++k)
    at += snprintf(line + at, sizeof line - (size_t)at, "%s\"%s\": %ld", k ? ", " : "", names[k], served[k]);
  at += snprintf(line + at, sizeof line - (size_t)at, "}, \"persistent\": {");
  for (int k = 0; k < KINDS; ++k)
    at += snprintf(line + at, sizeof line - (size_t)at, "%s\"%s\": %ld", k ? ", " : "", names[k], persistent_served[k]);
  at += snprintf(line + at, sizeof line - (size_t)at, "}}\n");
  if (argc > 1) {
    const int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0 || write(fd, line, (size_t)at) != at) ++failures;
    if (fd >= 0) close(fd);
  }
  int mine = failures, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("nonblocking: %s (%d failures)\n", all ? "FAILED" : "every check passed", all);
  MPI_Finalize();
  return all ? 1 : 0;
}
