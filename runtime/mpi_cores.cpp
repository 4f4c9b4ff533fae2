#include "runtime/mpi_cores.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/cores.hpp"
#include "transport/mpi_link.hpp"

namespace copse::mpi {

int agree_concurrent_ranks(MPI_Comm node, int threads, int ranks_on_host) {
  // Processes of a node may have different masks (launchers bind one per
  // core; MPMD jobs mix bindings): each sends its own, as a row of the
  // longest mask's words after its thread count.
  const CpuMask mine = process_cpus();
  int size = 1, words = static_cast<int>(mine.size()), most = 0;
  check_mpi(PMPI_Comm_size(node, &size), "MPI_Comm_size (node, for the cores)");
  check_mpi(PMPI_Allreduce(&words, &most, 1, MPI_INT, MPI_MAX, node), "MPI_Allreduce (mask words)");
  const auto row = static_cast<std::size_t>(most) + 1;
  std::vector<std::uint64_t> me(row, 0), all(row * static_cast<std::size_t>(size));
  me[0] = static_cast<std::uint64_t>(threads);
  std::copy(mine.begin(), mine.end(), me.begin() + 1);
  check_mpi(PMPI_Allgather(me.data(), static_cast<int>(row), MPI_UINT64_T, all.data(), static_cast<int>(row),
                           MPI_UINT64_T, node),
            "MPI_Allgather (affinity masks)");
  std::vector<RanksOnCpus> groups(static_cast<std::size_t>(size));
  int known = 0;
  for (std::size_t q = 0; q < groups.size(); ++q) {
    const auto first = all.begin() + static_cast<std::ptrdiff_t>(q * row);
    groups[q].ranks = static_cast<int>(*first);
    groups[q].cpus.assign(first + 1, first + static_cast<std::ptrdiff_t>(row));
    known += groups[q].ranks;
  }
  return concurrent_ranks(groups, std::max(0, ranks_on_host - known));
}

}  // namespace copse::mpi
