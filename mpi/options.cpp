#include "mpi/options.hpp"

namespace copse::mpi {

CommOptions make_comm_options(const Options& options) {
  CommOptions comm;
  const CollectiveOptions& c = options.collectives;
  comm.allreduce = c.allreduce;
  comm.reduce = c.reduce;
  comm.bcast = c.bcast;
  comm.barrier = c.barrier;
  comm.allgather = c.allgather;
  comm.reduce_scatter = c.reduce_scatter;
  comm.blocks = c.blocks.value_or(0);
  comm.model = make_cost_model(options.model);
  comm.grouping = options.hierarchy.parsed_grouping();
  comm.multi_leader = options.hierarchy.multi_leader;
  comm.ranks_per_node = options.hierarchy.ranks_per_node;
  comm.wait_timeout = options.runtime.wait_timeout_ms();
  comm.wait_report = options.runtime.wait_report_ms();
  comm.cross_memory_attach = options.mpi.cma == CmaMode::automatic ? CommOptions::Attach::automatic
                             : options.mpi.cma == CmaMode::on      ? CommOptions::Attach::on
                                                                   : CommOptions::Attach::off;
  return comm;
}

}  // namespace copse::mpi
