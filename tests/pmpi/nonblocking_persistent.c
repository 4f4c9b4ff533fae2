/* The persistent collectives of tests/pmpi/nonblocking.c (Open MPI's
 * MPIX_*_init): results, the calls served, and starts and waits that
 * allocate nothing. */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdlib.h>

#include "nonblocking.h"

/* A persistent allreduce started and waited for 50 times, alone. */
void persistent(long n) {
  int64_t *in = vec(n), *out = vec(n);
  MPI_Request r;
  fill(in, n, rank, 0);
  MPIX_Allreduce_init(in, out, (int)n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
  if (size > 1) ++persistent_served[ALLREDUCE];
  const long before = news;
  watch_news(1);
  for (int round = 0; round < 50; ++round) {
    fill(in, n, rank, round);
    MPI_Start(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(r != MPI_REQUEST_NULL, "MPI_Wait freed a persistent request");
    check_sum(out, n, size, round, __LINE__);
  }
  watch_news(0);
  CHECK(news == before, "persistent allreduce of %ld: %ld operator new calls after init", n, news - before);
  MPI_Request_free(&r);
  free(in), free(out);
}

/* A persistent call of every collective (roots p-1), started together by
 * MPI_Startall and finished by MPI_Waitall, 20 times: no operator new after
 * the inits. On a communicator of its own, whose queue of calls has never
 * held more than these. */
void persistent_all(long n) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Barrier(comm); /* its copse Team made: nonblocking and persistent starts are served from here on */
  const int p = size, me = rank, root = p - 1;
  int64_t *in = vec(n), *sum = vec(n), *red = vec(n), *bc = vec(n), *gath = vec(n * p), *rsin = vec(n * p),
          *rs = vec(n), *scin = vec(n * p), *scout = vec(n), *gaout = vec(n * p), *a2in = vec(n * p),
          *a2out = vec(n * p);
  /* Written before the inits too: their send buffers are const, read (by the compiler's account) at init. */
  for (long i = 0; i < n * p; ++i) gath[i] = rsin[i] = scin[i] = gaout[i] = a2in[i] = a2out[i] = 0;
  for (long i = 0; i < n; ++i) in[i] = sum[i] = red[i] = bc[i] = rs[i] = scout[i] = 0;
  /* reduce_scatter with counts: rank v gets v elements (rank 0 none), block v is value(., ., round + 80 + v). */
  int* counts = malloc((size_t)p * sizeof(int));
  for (int v = 0; v < p; ++v) counts[v] = v;
  int64_t *rvin = vec(p * p), *rv = vec(p);
  for (long i = 0; i < p * p; ++i) rvin[i] = 0;
  MPI_Request r[10];
  MPIX_Allreduce_init(in, sum, (int)n, MPI_INT64_T, MPI_SUM, comm, MPI_INFO_NULL, &r[0]);
  MPIX_Reduce_init(in, red, (int)n, MPI_INT64_T, MPI_SUM, root, comm, MPI_INFO_NULL, &r[1]);
  MPIX_Bcast_init(bc, (int)n, MPI_INT64_T, root, comm, MPI_INFO_NULL, &r[2]);
  MPIX_Barrier_init(comm, MPI_INFO_NULL, &r[3]);
  MPIX_Allgather_init(in, (int)n, MPI_INT64_T, gath, (int)n, MPI_INT64_T, comm, MPI_INFO_NULL, &r[4]);
  MPIX_Reduce_scatter_block_init(rsin, rs, (int)n, MPI_INT64_T, MPI_SUM, comm, MPI_INFO_NULL, &r[5]);
  MPIX_Scatter_init(scin, (int)n, MPI_INT64_T, scout, (int)n, MPI_INT64_T, root, comm, MPI_INFO_NULL, &r[6]);
  MPIX_Gather_init(in, (int)n, MPI_INT64_T, gaout, (int)n, MPI_INT64_T, root, comm, MPI_INFO_NULL, &r[7]);
  MPIX_Reduce_scatter_init(rvin, rv, counts, MPI_INT64_T, MPI_SUM, comm, MPI_INFO_NULL, &r[9]);
  MPIX_Alltoall_init(a2in, (int)n, MPI_INT64_T, a2out, (int)n, MPI_INT64_T, comm, MPI_INFO_NULL, &r[8]);
  static const int kinds[10] = {ALLREDUCE, REDUCE, BCAST, BARRIER, ALLGATHER, RSB, SCATTER, GATHER, ALLTOALL, RS};
  if (size > 1)
    for (int k = 0; k < 10; ++k) ++persistent_served[kinds[k]];
  const long before = news;
  watch_news(1);
  for (int round = 0; round < 20; ++round) {
    fill(in, n, me, round);
    for (long i = 0; i < n; ++i) bc[i] = me == root ? value(root, i, round + 1) : -1;
    for (int v = 0; v < p; ++v) {
      fill(rsin + (long)v * n, n, me, round + 3 + v);
      fill(scin + (long)v * n, n, v, round + 50);
      fill(a2in + (long)v * n, n, me, round + 60 + v);
    }
    for (int v = 0, at = 0; v < p; at += counts[v], ++v) fill(rvin + at, counts[v], me, round + 80 + v);
    MPI_Startall(10, r);
    MPI_Waitall(10, r, MPI_STATUSES_IGNORE);
    for (int k = 0; k < 10; ++k) CHECK(r[k] != MPI_REQUEST_NULL, "MPI_Waitall freed persistent request %d", k);
    check_sum(sum, n, p, round, __LINE__);
    if (me == root) check_sum(red, n, p, round, __LINE__);
    for (long i = 0; i < n; ++i)
      if (bc[i] != value(root, i, round + 1)) { CHECK(0, "persistent bcast n=%ld element %ld", n, i); break; }
    CHECK(blocks_ok(gath, p, n, round), "persistent allgather n=%ld", n);
    check_sum(rs, n, p, round + 3 + me, __LINE__);
    for (long i = 0; i < n; ++i)
      if (scout[i] != value(me, i, round + 50)) { CHECK(0, "persistent scatter n=%ld element %ld", n, i); break; }
    if (me == root) CHECK(blocks_ok(gaout, p, n, round), "persistent gather n=%ld", n);
    CHECK(blocks_ok(a2out, p, n, round + 60 + me), "persistent alltoall n=%ld", n);
    check_sum(rv, counts[me], p, round + 80 + me, __LINE__);
  }
  watch_news(0);
  CHECK(news == before, "persistent calls of %ld: %ld operator new calls after init", n, news - before);
  for (int k = 0; k < 10; ++k) MPI_Request_free(&r[k]);
  free(in), free(sum), free(red), free(bc), free(gath), free(rsin), free(rs), free(scin), free(scout), free(gaout);
  free(a2in), free(a2out), free(rvin), free(rv), free(counts);
  MPI_Comm_free(&comm);
}
