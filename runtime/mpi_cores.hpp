#pragma once
// The node's processes agree how many of the host's ranks can run at once
// (common/cores.hpp), for the link engine's spin-or-yield decision
// (LinkConfig::concurrent_ranks).

#include <mpi.h>

namespace copse::mpi {

// Collective over `node` (the processes sharing this host's memory): every
// process brings its affinity mask and its `threads` thread ranks; each gets
// the same concurrent_ranks() of them all, with the host's ranks beyond them
// (`ranks_on_host` less theirs: other processes of the job, masks unknown)
// taken to share the union of their masks.
int agree_concurrent_ranks(MPI_Comm node, int threads, int ranks_on_host);

}  // namespace copse::mpi
