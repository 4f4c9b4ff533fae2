// An out-of-tree MPI program built against an installed copse with
// find_package(copse COMPONENTS mpi) and copse::mpi (tests/install/run.sh), run
// under mpirun: a copse Team over MPI_COMM_WORLD, an allreduce through it and
// one through MPI_Allreduce (which libcopse_mpi, linked before libmpi, serves),
// both checked. Exit 0 when both sums are right on every process.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdio>
#include <vector>

#include "runtime/mpi_comm.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  constexpr int kCount = 1000;
  const long long want = static_cast<long long>(size) * (size + 1) / 2;
  std::vector<long long> send(kCount, rank + 1), by_team(kCount, -1), by_mpi(kCount, -1);
  {
    copse::mpi::Team team(MPI_COMM_WORLD);
    team.comm().allreduce(send.data(), by_team.data(), kCount, copse::builtin_op("sum", copse::DType::int64));
  }
  MPI_Allreduce(send.data(), by_mpi.data(), kCount, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  int wrong = 0;
  for (int i = 0; i < kCount; ++i) wrong += (by_team[i] != want) + (by_mpi[i] != want);
  if (wrong) std::fprintf(stderr, "mpi_consumer: rank %d: %d wrong elements (expected %lld)\n", rank, wrong, want);
  if (rank == 0 && !wrong)
    std::printf("mpi_consumer: %d processes, copse Team and MPI_Allreduce of %d int64: ok\n", size, kCount);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
