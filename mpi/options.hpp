#pragma once
// The configuration (config/config.hpp) as the options of an MPI Team. This
// lives in mpi/, not config/, because CommOptions comes with <mpi.h>, and
// reading the configuration must not make every user of copse need MPI.

#include "config/config.hpp"
#include "runtime/mpi_comm.hpp"

namespace copse::mpi {

// Every setting of `options` that a Team over MPI takes: the algorithm per
// collective, blocks and the cost model they are tuned with, grouping,
// multi-leader, virtual nodes (hierarchy.ranks_per_node) and the waits.
CommOptions make_comm_options(const Options& options);

}  // namespace copse::mpi
