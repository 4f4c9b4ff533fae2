#pragma once
// The node's processes agree how many of the host's ranks can run at once
// (common/cores.hpp), for the link engine's spin-or-yield decision
// (LinkConfig::concurrent_ranks).

#include <mpi.h>

namespace copse::mpi {

// The ranks that share this machine's cores, and how many of them can run
// at once.
struct MachineCores {
  int ranks = 0;       // of the communicator and the host, on this machine
  int concurrent = 0;  // concurrent_ranks() of them
};

// Collective over `job` (every process of the communicator): every process
// brings its machine (machine_id()), its affinity mask and its `threads`
// thread ranks; each keeps those of its own machine -- its node's processes,
// and those of other nodes on the same machine (hosts made of namespaces,
// which would otherwise each count their own ranks against the cores they
// all share) -- and gets concurrent_ranks() of them, with the host's ranks
// beyond them (`ranks_on_host` less theirs: other processes of the job,
// masks unknown) taken to share the union of their masks.
MachineCores agree_concurrent_ranks(MPI_Comm job, int threads, int ranks_on_host);

}  // namespace copse::mpi
