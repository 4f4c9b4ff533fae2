/* What tests/pmpi/collectives.c shares with collectives_vector.c: the
 * collectives it counts, its checks and expectations, its inputs. */
#ifndef COPSE_TESTS_PMPI_COLLECTIVES_H
#define COPSE_TESTS_PMPI_COLLECTIVES_H

#include <mpi.h>

enum {
  ALLREDUCE, REDUCE, BCAST, BARRIER, ALLGATHER, REDUCE_SCATTER_BLOCK, REDUCE_SCATTER, SCATTER, GATHER, ALLTOALL,
  ALLGATHERV, GATHERV, SCATTERV, ALLTOALLV
};
enum { COLLECTIVES = ALLTOALLV + 1 };

extern int world_rank, world_size, failures;

/* A failed check: one line on stderr, written whole. */
void report(int line, const char* format, ...);
#define CHECK(cond, ...)                        \
  do {                                          \
    if (!(cond)) report(__LINE__, __VA_ARGS__); \
  } while (0)

int comm_size(MPI_Comm comm);
int comm_rank(MPI_Comm comm);
/* One call about to be made: copse_can says whether its datatype and
 * operator are copse's; bytes are what each process contributes. */
void expect(int collective, MPI_Comm comm, int copse_can, long long bytes);
/* The world ranks of comm's members, in comm's order (malloc'd). */
int* members(MPI_Comm comm);
/* Element i of world rank `world`'s input. */
int input(int world, int i);

/* allgatherv, gatherv, scatterv and alltoallv on comm (collectives_vector.c). */
void vector_collectives(MPI_Comm comm, const char* label);

#endif
