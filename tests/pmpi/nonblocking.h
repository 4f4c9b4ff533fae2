/* What tests/pmpi/nonblocking.c and nonblocking_persistent.c share: the
 * calls expected to be served, the checks, and the data every rank
 * contributes. */
#pragma once
#include <stdint.h>
#include <stdio.h>

enum {
  ALLREDUCE, REDUCE, BCAST, BARRIER, ALLGATHER, RSB, RS, SCATTER, GATHER, ALLTOALL,
  ALLGATHERV, GATHERV, SCATTERV, ALLTOALLV, KINDS
};
extern const char* const names[KINDS]; /* as the stats file names them */
/* The nonblocking and the persistent calls this process expects copse to serve, by kind. */
extern long served[KINDS], persistent_served[KINDS];
extern int rank, size; /* in MPI_COMM_WORLD */
extern _Atomic int failures;
extern volatile long news; /* operator new calls so far (copse's allocations) */
void watch_news(int on); /* while on, each operator new prints its caller's stack */

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "rank %d: line %d: ", rank, __LINE__);          \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

/* What rank r contributes at element i of call `salt`, and the sum over p ranks. */
int64_t value(int r, long i, int salt);
int64_t sum_of(int p, long i, int salt);
int64_t* vec(long n); /* n elements (at least one) from malloc */
void fill(int64_t* v, long n, int r, int salt);
/* got[i] == sum_of(p, i, salt) for every i (else a failure naming `line`). */
void check_sum(const int64_t* got, long n, int p, int salt, int line);
/* Whether block v of p blocks of n elements holds rank v's value(v, i, salt) at its element i. */
int blocks_ok(const int64_t* got, int p, long n, int salt);

/* tests/pmpi/nonblocking_persistent.c */
void persistent(long n);
void persistent_all(long n);

/* tests/pmpi/nonblocking_vector.c: the v-variants at base count n (salts
 * from `salt`), and their persistent forms. */
void vector_all(long n, int salt);
void vector_persistent(long n);
void vector_deferred(void);
