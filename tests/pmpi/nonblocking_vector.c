/* The nonblocking and persistent v-variants of tests/pmpi/nonblocking.c:
 * MPI_Iallgatherv, MPI_Igatherv, MPI_Iscatterv, MPI_Ialltoallv and Open
 * MPI's MPIX_*v_init. Unequal counts with every third block empty (and all
 * empty at count 0), displacements with gaps (which no call may write: they
 * hold -7; the alltoallv sends from a layout of wider gaps than it receives in), roots p-1, and MPI_IN_PLACE wherever MPI
 * allows it: the eight calls of a round all outstanding at once with a
 * library send and receive in the same MPI_Waitall, on one communicator and
 * on two; every result against the sequential reference value(). */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdlib.h>

#include "nonblocking.h"

enum { GAP = -7, CALLS = 8 };

/* Rank v's block of the allgatherv, gatherv and scatterv at base count n. */
static int cnt(int v, long n) { return n == 0 || v % 3 == 1 ? 0 : (int)n + v % 2; }
/* The alltoallv block between s and d (symmetric, as MPI_IN_PLACE needs). */
static int a2c(int s, int d, long n, int p) { return n == 0 || (s + d) % 3 == 1 ? 0 : (int)(n / p) + 1 + (s + d) % 2; }

/* Displacements of counts[0..p-1] with `gap` elements after each block;
 * returns the span in elements. */
static long gapped(const int* counts, int* displs, int p, int gap) {
  long at = 0;
  for (int v = 0; v < p; ++v) displs[v] = (int)at, at += counts[v] + gap;
  return at;
}

/* One round's buffers and requests on one communicator. */
struct round {
  MPI_Comm comm;
  int p, me, root, salt;
  long n;
  int *counts, *displs, *sc, *sd, *rc, *rd;
  long span, sspan, rspan;
  int64_t *mine, *ag, *ag_ip, *gv, *gv_ip, *sv_send, *sv, *sv_ip, *a2_send, *a2, *a2_ip;
  MPI_Request r[CALLS];
};

static void set_gaps(int64_t* v, long span) {
  for (long i = 0; i < span; ++i) v[i] = GAP;
}

static void make(struct round* t, MPI_Comm comm, long n) {
  MPI_Comm_size(comm, &t->p);
  MPI_Comm_rank(comm, &t->me);
  const int p = t->p;
  t->comm = comm, t->n = n, t->root = p - 1;
  t->counts = malloc(sizeof(int) * (size_t)p), t->displs = malloc(sizeof(int) * (size_t)p);
  t->sc = malloc(sizeof(int) * (size_t)p), t->sd = malloc(sizeof(int) * (size_t)p);
  t->rc = malloc(sizeof(int) * (size_t)p), t->rd = malloc(sizeof(int) * (size_t)p);
  for (int v = 0; v < p; ++v) t->counts[v] = cnt(v, n), t->sc[v] = a2c(t->me, v, n, p), t->rc[v] = a2c(v, t->me, n, p);
  t->span = gapped(t->counts, t->displs, p, 1);
  t->sspan = gapped(t->sc, t->sd, p, 2); /* the alltoallv's send layout is not its receive layout */
  t->rspan = gapped(t->rc, t->rd, p, 1);
  t->mine = vec(cnt(t->me, n)), t->sv = vec(cnt(t->me, n)), t->sv_ip = vec(cnt(t->me, n));
  t->ag = vec(t->span), t->ag_ip = vec(t->span), t->gv = vec(t->span), t->gv_ip = vec(t->span);
  t->sv_send = vec(t->span), t->a2_send = vec(t->sspan), t->a2 = vec(t->rspan), t->a2_ip = vec(t->rspan);
}

static void unmake(struct round* t) {
  free(t->counts), free(t->displs), free(t->sc), free(t->sd), free(t->rc), free(t->rd);
  free(t->mine), free(t->sv), free(t->sv_ip), free(t->ag), free(t->ag_ip), free(t->gv), free(t->gv_ip);
  free(t->sv_send), free(t->a2_send), free(t->a2), free(t->a2_ip);
}

/* The inputs of round `salt`, and the outputs reset to GAP. */
static void load(struct round* t, int salt) {
  const int p = t->p, me = t->me;
  t->salt = salt;
  fill(t->mine, cnt(me, t->n), me, salt);
  set_gaps(t->ag, t->span), set_gaps(t->ag_ip, t->span), set_gaps(t->gv, t->span), set_gaps(t->gv_ip, t->span);
  set_gaps(t->sv, cnt(me, t->n)), set_gaps(t->sv_ip, cnt(me, t->n));
  fill(t->ag_ip + t->displs[me], t->counts[me], me, salt);  /* in place: this rank's block is there */
  if (me == t->root) fill(t->gv_ip + t->displs[me], t->counts[me], me, salt);
  set_gaps(t->sv_send, t->span);
  for (int v = 0; v < p; ++v) fill(t->sv_send + t->displs[v], t->counts[v], v, salt); /* the root's blocks for v */
  set_gaps(t->a2_send, t->sspan), set_gaps(t->a2, t->rspan), set_gaps(t->a2_ip, t->rspan);
  for (int d = 0; d < p; ++d) {
    fill(t->a2_send + t->sd[d], t->sc[d], me, salt + d);
    fill(t->a2_ip + t->rd[d], t->rc[d], me, salt + d); /* in place: the send blocks by the receive layout */
  }
}

/* The round's eight calls; `init`: as persistent requests (not started). */
static void start(struct round* t, int init) {
  const int me = t->me, root = t->root, at_root = me == root, mine = cnt(me, t->n);
  MPI_Comm c = t->comm;
  MPI_Request* r = t->r;
  MPI_Info i = MPI_INFO_NULL;
  if (init) {
    MPIX_Allgatherv_init(t->mine, mine, MPI_INT64_T, t->ag, t->counts, t->displs, MPI_INT64_T, c, i, &r[0]);
    MPIX_Allgatherv_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t->ag_ip, t->counts, t->displs, MPI_INT64_T, c, i, &r[1]);
    MPIX_Gatherv_init(t->mine, mine, MPI_INT64_T, t->gv, t->counts, t->displs, MPI_INT64_T, root, c, i, &r[2]);
    MPIX_Gatherv_init(at_root ? MPI_IN_PLACE : t->mine, mine, MPI_INT64_T, t->gv_ip, t->counts, t->displs,
                      MPI_INT64_T, root, c, i, &r[3]);
    MPIX_Scatterv_init(t->sv_send, t->counts, t->displs, MPI_INT64_T, t->sv, mine, MPI_INT64_T, root, c, i, &r[4]);
    MPIX_Scatterv_init(t->sv_send, t->counts, t->displs, MPI_INT64_T, at_root ? MPI_IN_PLACE : t->sv_ip, mine,
                       MPI_INT64_T, root, c, i, &r[5]);
    MPIX_Alltoallv_init(t->a2_send, t->sc, t->sd, MPI_INT64_T, t->a2, t->rc, t->rd, MPI_INT64_T, c, i, &r[6]);
    MPIX_Alltoallv_init(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, t->a2_ip, t->rc, t->rd, MPI_INT64_T, c, i, &r[7]);
  } else {
    MPI_Iallgatherv(t->mine, mine, MPI_INT64_T, t->ag, t->counts, t->displs, MPI_INT64_T, c, &r[0]);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t->ag_ip, t->counts, t->displs, MPI_INT64_T, c, &r[1]);
    MPI_Igatherv(t->mine, mine, MPI_INT64_T, t->gv, t->counts, t->displs, MPI_INT64_T, root, c, &r[2]);
    MPI_Igatherv(at_root ? MPI_IN_PLACE : t->mine, mine, MPI_INT64_T, t->gv_ip, t->counts, t->displs, MPI_INT64_T,
                 root, c, &r[3]);
    MPI_Iscatterv(t->sv_send, t->counts, t->displs, MPI_INT64_T, t->sv, mine, MPI_INT64_T, root, c, &r[4]);
    MPI_Iscatterv(t->sv_send, t->counts, t->displs, MPI_INT64_T, at_root ? MPI_IN_PLACE : t->sv_ip, mine, MPI_INT64_T,
                  root, c, &r[5]);
    MPI_Ialltoallv(t->a2_send, t->sc, t->sd, MPI_INT64_T, t->a2, t->rc, t->rd, MPI_INT64_T, c, &r[6]);
    MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, t->a2_ip, t->rc, t->rd, MPI_INT64_T, c, &r[7]);
  }
  if (t->p > 1) {
    long* kinds = init ? persistent_served : served;
    kinds[ALLGATHERV] += 2, kinds[GATHERV] += 2, kinds[SCATTERV] += 2, kinds[ALLTOALLV] += 2;
  }
}

/* Block v of a gapped layout holds `count` elements value(from, i, salt), then the gap. */
static int block_ok(const int64_t* got, int count, int from, int salt) {
  for (int i = 0; i < count; ++i)
    if (got[i] != value(from, i, salt)) return 0;
  return got[count] == GAP;
}

static void check(const struct round* t) {
  const int p = t->p, me = t->me, s = t->salt, at_root = me == t->root, mine = cnt(me, t->n);
  for (int v = 0; v < p; ++v) {
    CHECK(block_ok(t->ag + t->displs[v], t->counts[v], v, s), "iallgatherv n %ld block %d", t->n, v);
    CHECK(block_ok(t->ag_ip + t->displs[v], t->counts[v], v, s), "iallgatherv in place n %ld block %d", t->n, v);
    if (at_root) {
      CHECK(block_ok(t->gv + t->displs[v], t->counts[v], v, s), "igatherv n %ld block %d", t->n, v);
      CHECK(block_ok(t->gv_ip + t->displs[v], t->counts[v], v, s), "igatherv in place n %ld block %d", t->n, v);
    }
    CHECK(block_ok(t->a2 + t->rd[v], t->rc[v], v, s + me), "ialltoallv n %ld block from %d", t->n, v);
    CHECK(block_ok(t->a2_ip + t->rd[v], t->rc[v], v, s + me), "ialltoallv in place n %ld block from %d", t->n, v);
  }
  int ok = 1, ok_ip = 1;
  for (int i = 0; i < mine; ++i) {
    ok = ok && t->sv[i] == value(me, i, s);
    ok_ip = ok_ip && (at_root ? t->sv_send[t->displs[me] + i] : t->sv_ip[i]) == value(me, i, s);
  }
  CHECK(ok, "iscatterv n %ld", t->n);
  CHECK(ok_ip, "iscatterv in place n %ld", t->n);
}

/* A library ring exchange: its two requests join the round's in one MPI_Waitall. */
static void ring(MPI_Request* r, const int64_t* token, int64_t* got) {
  MPI_Irecv(got, 1, MPI_INT64_T, (rank + size - 1) % size, 9, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(token, 1, MPI_INT64_T, (rank + 1) % size, 9, MPI_COMM_WORLD, &r[1]);
}

/* Rounds at count n: on MPI_COMM_WORLD alone, then on it and a second
 * communicator at once, each time with library requests in the Waitall. */
void vector_all(long n, int salt) {
  MPI_Comm other;
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  MPI_Barrier(other); /* its copse Team: nonblocking starts are served from here on */
  struct round a, b;
  make(&a, MPI_COMM_WORLD, n), make(&b, other, n);
  MPI_Request all[2 * CALLS + 2];
  int64_t token = rank, got = -1;
  load(&a, salt);
  start(&a, 0);
  ring(&all[CALLS], &token, &got);
  for (int k = 0; k < CALLS; ++k) all[k] = a.r[k];
  MPI_Waitall(CALLS + 2, all, MPI_STATUSES_IGNORE);
  check(&a);
  CHECK(got == (rank + size - 1) % size, "ring beside the v-variants: %lld", (long long)got);

  load(&a, salt + 1), load(&b, salt + 2);
  start(&a, 0);
  start(&b, 0);
  got = -1;
  ring(&all[2 * CALLS], &token, &got);
  for (int k = 0; k < CALLS; ++k) all[k] = b.r[k], all[CALLS + k] = a.r[k]; /* the other first */
  MPI_Waitall(2 * CALLS + 2, all, MPI_STATUSES_IGNORE);
  check(&a), check(&b);
  CHECK(got == (rank + size - 1) % size, "ring beside two communicators: %lld", (long long)got);
  unmake(&a), unmake(&b);
  MPI_Comm_free(&other);
}

/* The persistent forms: inited once, started together 10 times; no operator
 * new after the inits. */
void vector_persistent(long n) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Barrier(comm);
  struct round t;
  make(&t, comm, n);
  load(&t, 0);
  start(&t, 1);
  const long before = news;
  watch_news(1);
  for (int round = 0; round < 10; ++round) {
    load(&t, round + 1);
    MPI_Startall(CALLS, t.r);
    MPI_Waitall(CALLS, t.r, MPI_STATUSES_IGNORE);
    check(&t);
  }
  watch_news(0);
  CHECK(news == before, "persistent v-variants of %ld: %ld operator new calls after init", n, news - before);
  for (int k = 0; k < CALLS; ++k) MPI_Request_free(&t.r[k]);
  unmake(&t);
  MPI_Comm_free(&comm);
}

/* A gapped receive datatype: copse cannot serve the call, so every process
 * defers it -- decided in the call's queued agreement -- to the library's
 * MPI_Iallgatherv, between two calls copse serves on the same communicator
 * (not counted served: the stats show it passed). */
void vector_deferred(void) {
  const int p = size, me = rank;
  MPI_Datatype spaced;
  MPI_Type_create_resized(MPI_INT64_T, 0, 2 * (MPI_Aint)sizeof(int64_t), &spaced);
  MPI_Type_commit(&spaced);
  int *counts = malloc(sizeof(int) * (size_t)p), *displs = malloc(sizeof(int) * (size_t)p);
  for (int v = 0; v < p; ++v) counts[v] = 1, displs[v] = v;
  int64_t mine = value(me, 0, 77), *gapped_all = vec(2L * p), *before = vec(p), *after = vec(p);
  set_gaps(gapped_all, 2L * p);
  MPI_Request r[3];
  MPI_Iallgatherv(&mine, 1, MPI_INT64_T, before, counts, displs, MPI_INT64_T, MPI_COMM_WORLD,
                  &r[0]);
  MPI_Iallgatherv(&mine, 1, MPI_INT64_T, gapped_all, counts, displs, spaced, MPI_COMM_WORLD, &r[1]);
  MPI_Iallgatherv(&mine, 1, MPI_INT64_T, after, counts, displs, MPI_INT64_T, MPI_COMM_WORLD, &r[2]);
  if (p > 1) served[ALLGATHERV] += 2;
  MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
  for (int v = 0; v < p; ++v) {
    CHECK(gapped_all[2 * v] == value(v, 0, 77) && gapped_all[2 * v + 1] == GAP, "deferred iallgatherv block %d", v);
    CHECK(before[v] == value(v, 0, 77) && after[v] == value(v, 0, 77), "iallgatherv beside the deferred one %d", v);
  }
  MPI_Type_free(&spaced);
  free(counts), free(displs), free(gapped_all), free(before), free(after);
}
