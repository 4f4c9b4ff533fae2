/* copse from C: a copse team over an MPI communicator, and its collectives.
 *
 * Link with libcopse_mpi.so (before libmpi), which also serves the program's
 * own MPI collectives (see the README, "Using copse from an MPI
 * application"); MPI_Init must have gone through it. A team is every process
 * of the communicator, each bringing `threads` thread ranks (hybrid
 * MPI+threads; more than one needs MPI_THREAD_SERIALIZED or above); each
 * thread calls collectives on its own copse_comm. Settings come from the
 * configuration, as for the interposed collectives: COPSE_* variables and
 * copse.toml.
 *
 *   copse_team* team;
 *   copse_comm* comm;
 *   if (copse_team_create(MPI_COMM_WORLD, 1, &team) != COPSE_SUCCESS ||
 *       copse_team_comm(team, 0, &comm) != COPSE_SUCCESS) {
 *     fprintf(stderr, "%s\n", copse_error_message());
 *     ...
 *   }
 *   copse_allreduce(comm, MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM);
 *   copse_team_free(team);
 *
 * Datatypes and operators are MPI's, as copse serves them (mpi/mapping.hpp):
 * the predefined integer and floating-point datatypes, MPI_BYTE and MPI_CHAR;
 * MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_LAND,
 * MPI_LOR where MPI defines them, and operators from MPI_Op_create. Any other
 * datatype or operator is COPSE_ERR_USAGE. Non-commutative operators are
 * applied in rank order.
 *
 * In place: MPI_IN_PLACE as the send buffer, or the same pointer as send and
 * receive buffer, with MPI's meaning for each collective. Counts are
 * elements, as size_t.
 *
 * Every function returns COPSE_SUCCESS or an error code; the calling thread's
 * copse_error_message() then says what went wrong in one line. Collectives
 * must be called by every rank of the team in the same order with matching
 * arguments. Free a team before MPI_Finalize; one still alive then is torn
 * down by MPI_Finalize and must still be freed (which then only releases
 * memory). */
#ifndef COPSE_MPI_H
#define COPSE_MPI_H

#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum copse_error {
  COPSE_SUCCESS = 0,
  COPSE_ERR_USAGE = 1,    /* bad input: datatype, operator, root, thread, threads, configuration */
  COPSE_ERR_SCHEDULE = 2, /* ranks called with sizes that do not match */
  COPSE_ERR_TIMEOUT = 3,  /* a wait ran past runtime.wait_timeout; the message names peer and step */
  COPSE_ERR_ABORTED = 4,  /* another rank failed first */
  COPSE_ERR_FAILED = 5,   /* a wrong result was detected */
  COPSE_ERR_SYSTEM = 6,   /* the system or the MPI library refused: shared memory, threads, ... */
  COPSE_ERR_NO_MEMORY = 7,
  COPSE_ERR_INTERNAL = 8
};

typedef struct copse_team copse_team;
typedef struct copse_comm copse_comm;

/* Collective over `comm` (an intracommunicator): every process calls it with
 * the number of thread ranks it brings (>= 1). The communicator is
 * duplicated, not kept. */
int copse_team_create(MPI_Comm comm, int threads, copse_team** team);
/* Not collective. NULL is accepted. */
int copse_team_free(copse_team* team);
/* The handle the calling thread uses as thread rank `thread` of this process
 * (0 <= thread < threads); copse ranks are numbered process by process in
 * the communicator's rank order, threads in order within one. */
int copse_team_comm(copse_team* team, int thread, copse_comm** comm);
int copse_comm_rank(const copse_comm* comm, int* rank);
int copse_comm_size(const copse_comm* comm, int* size);

int copse_allreduce(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, MPI_Op op);
/* recv is used at the root only. */
int copse_reduce(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, MPI_Op op, int root);
int copse_bcast(copse_comm* comm, void* buffer, size_t count, MPI_Datatype type, int root);
int copse_barrier(copse_comm* comm);
/* recv holds size * count elements, rank r's at r * count. */
int copse_allgather(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type);
/* send holds size * count elements; recv gets this rank's reduced block. */
int copse_reduce_scatter_block(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type,
                               MPI_Op op);
/* Blocks of different sizes: rank r gets counts[r] elements. */
int copse_reduce_scatter(copse_comm* comm, const void* send, void* recv, const int* counts, MPI_Datatype type,
                         MPI_Op op);

/* Scatter: send, at the root only, holds size * count elements, rank r's
 * block at r * count; recv gets this rank's block. MPI_IN_PLACE as recv at
 * the root: its block stays in send. */
int copse_scatter(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, int root);
/* Gather: recv, at the root only, gets size * count elements, rank r's at
 * r * count. MPI_IN_PLACE as send at the root: its block is already in recv. */
int copse_gather(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type, int root);
/* Alltoall: send holds size * count elements, the block for rank d at
 * d * count; recv gets the block from rank s at s * count. MPI_IN_PLACE as
 * send: the blocks to send are in recv, replaced by those received. */
int copse_alltoall(copse_comm* comm, const void* send, void* recv, size_t count, MPI_Datatype type);
/* The v-variants, as MPI's (counts and displacements in elements; displs
 * NULL: packed in rank order). Gatherv's and scatterv's counts and displs
 * are read at the root only; MPI_IN_PLACE as for MPI_Allgatherv (send),
 * MPI_Gatherv (send, at the root), MPI_Scatterv (recv, at the root) and
 * MPI_Alltoallv (send: the blocks to send are recv's, by the receive counts). */
int copse_allgatherv(copse_comm* comm, const void* send, void* recv, const int* counts, const int* displs,
                     MPI_Datatype type);
int copse_gatherv(copse_comm* comm, const void* send, size_t count, void* recv, const int* counts, const int* displs,
                  MPI_Datatype type, int root);
int copse_scatterv(copse_comm* comm, const void* send, const int* counts, const int* displs, void* recv, size_t count,
                   MPI_Datatype type, int root);
int copse_alltoallv(copse_comm* comm, const void* send, const int* send_counts, const int* send_displs, void* recv,
                    const int* recv_counts, const int* recv_displs, MPI_Datatype type);

/* Progress report for the next allreduce (Proficz 2018, section 3): this
 * rank has done `fraction` (0 < fraction <= 1) of its computation phase, the
 * time since its previous collective returned. With an arrival-aware
 * allreduce (collectives.allreduce = "slt" or "prr") the allreduce is then,
 * after a warm-up of 3 calls, planned in predicted arrival order, the latest
 * rank last; with any other algorithm it only feeds the estimate. Never
 * blocks: it sends this rank's prediction (8 bytes) to every other rank.
 *
 *   for (;;) { compute_first_half(); copse_edge(comm, 0.5); compute_rest();
 *              copse_allreduce(comm, MPI_IN_PLACE, grad, n, MPI_FLOAT, MPI_SUM); } */
int copse_edge(copse_comm* comm, double fraction);

/* The calling thread's last error, one line ("" if none yet). */
const char* copse_error_message(void);
/* "COPSE_SUCCESS", "COPSE_ERR_USAGE", ...; "unknown" for another value. */
const char* copse_error_name(int code);

#ifdef __cplusplus
}
#endif

#endif /* COPSE_MPI_H */
