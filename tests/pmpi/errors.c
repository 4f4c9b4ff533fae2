/* A plain MPI program whose processes call a collective with counts that do
 * not match (rank 1 brings one element more), run under
 * LD_PRELOAD=libcopse_mpi.so on two or more processes, to see copse's error
 * go through the communicator's error handler:
 *
 *   errors return   on a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN,
 *                   every process's MPI_Allreduce returns an error, of class
 *                   MPI_ERR_TRUNCATE on rank 1 (the one that differs); on a
 *                   second duplicate with a handler of the program's own,
 *                   the handler sees the class the call returns. Exit 0 if so.
 *   errors fatal    the same on MPI_COMM_WORLD (MPI_ERRORS_ARE_FATAL): the
 *                   job must end through MPI_Abort, copse having said why on
 *                   one line (tests/pmpi/run.sh checks stderr).
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int handled_class = -1, handled_calls = 0;

static void handler(MPI_Comm* comm, int* code, ...) {
  (void)comm;
  MPI_Error_class(*code, &handled_class);
  ++handled_calls;
}

/* MPI_Allreduce of 4 ints, 5 on rank 1; the error class it returns. */
static int mismatched(MPI_Comm comm, int rank) {
  int in[5] = {1, 2, 3, 4, 5}, out[5];
  const int rc = MPI_Allreduce(in, out, rank == 1 ? 5 : 4, MPI_INT, MPI_SUM, comm);
  int error_class = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &error_class);
  return error_class;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    mismatched(MPI_COMM_WORLD, rank);
    fprintf(stderr, "rank %d: MPI_Allreduce with mismatched counts returned under MPI_ERRORS_ARE_FATAL\n", rank);
    MPI_Finalize();
    return 1;
  }

  MPI_Comm returning, handled;
  MPI_Comm_dup(MPI_COMM_WORLD, &returning);
  MPI_Comm_set_errhandler(returning, MPI_ERRORS_RETURN);
  const int returned = mismatched(returning, rank);
  if (returned == MPI_SUCCESS || (rank == 1 && returned != MPI_ERR_TRUNCATE)) {
    fprintf(stderr, "rank %d: MPI_ERRORS_RETURN: error class %d, expected %s\n", rank, returned,
            rank == 1 ? "MPI_ERR_TRUNCATE" : "an error");
    ++failures;
  }

  MPI_Errhandler own;
  MPI_Comm_create_errhandler(handler, &own);
  MPI_Comm_dup(MPI_COMM_WORLD, &handled);
  MPI_Comm_set_errhandler(handled, own);
  const int seen = mismatched(handled, rank);
  if (seen == MPI_SUCCESS || handled_calls != 1 || handled_class != seen) {
    fprintf(stderr, "rank %d: own handler: called %d times with class %d, the call returned %d\n", rank, handled_calls,
            handled_class, seen);
    ++failures;
  }
  MPI_Errhandler_free(&own);
  MPI_Comm_free(&handled);
  MPI_Comm_free(&returning);

  /* The world still works. */
  int one = 1, all = 0;
  MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (all != size) {
    fprintf(stderr, "rank %d: MPI_COMM_WORLD after the errors: %d, expected %d\n", rank, all, size);
    ++failures;
  }
  MPI_Finalize();
  return failures ? 1 : 0;
}
