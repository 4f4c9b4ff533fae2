#include "runtime/mpi_cores.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/cores.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

MachineCores agree_concurrent_ranks(MPI_Comm job, int threads, int ranks_on_host) {
  // Processes may have different masks (launchers bind one per core; MPMD
  // jobs mix bindings): each sends its own, as a row of the longest mask's
  // words after its machine and thread count.
  const CpuMask mine = process_cpus();
  const std::uint64_t machine = machine_id();
  int size = 1, words = static_cast<int>(mine.size()), most = 0;
  check_mpi(PMPI_Comm_size(job, &size), "MPI_Comm_size (for the cores)");
  check_mpi(PMPI_Allreduce(&words, &most, 1, MPI_INT, MPI_MAX, job), "MPI_Allreduce (mask words)");
  const auto row = static_cast<std::size_t>(most) + 2;
  std::vector<std::uint64_t> me(row, 0), all(row * static_cast<std::size_t>(size));
  me[0] = machine;
  me[1] = static_cast<std::uint64_t>(threads);
  std::copy(mine.begin(), mine.end(), me.begin() + 2);
  check_mpi(PMPI_Allgather(me.data(), static_cast<int>(row), MPI_UINT64_T, all.data(), static_cast<int>(row),
                           MPI_UINT64_T, job),
            "MPI_Allgather (machines and affinity masks)");
  std::vector<RanksOnCpus> groups;
  int known = 0;
  for (std::size_t q = 0; q < static_cast<std::size_t>(size); ++q) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(q * row);
    if (first[0] != machine) continue;
    RanksOnCpus& g = groups.emplace_back();
    g.ranks = static_cast<int>(first[1]);
    g.cpus.assign(first + 2, first + static_cast<std::ptrdiff_t>(row));
    known += g.ranks;
  }
  const int others = std::max(0, ranks_on_host - known);
  return {known + others, concurrent_ranks(groups, others)};
}

}  // namespace copse::mpi
