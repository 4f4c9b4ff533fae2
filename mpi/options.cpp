#include "mpi/options.hpp"

namespace copse::mpi {

CommOptions make_comm_options(const Options& options) {
  CommOptions comm;
  static_cast<PlanOptions&>(comm) = make_plan_options(options);
  comm.ranks_per_node = options.hierarchy.ranks_per_node;
  comm.form_falls_back = true;  // one hierarchy.form for every communicator (CommOptions::form_falls_back)
  comm.wait_timeout = options.runtime.wait_timeout_ms();
  comm.wait_report = options.runtime.wait_report_ms();
  using Attach = CommOptions::Attach;
  switch (options.mpi.cma) {
    case CmaMode::automatic: comm.cross_memory_attach = Attach::automatic; break;
    case CmaMode::on: comm.cross_memory_attach = Attach::on; break;
    case CmaMode::allgather: comm.cross_memory_attach = Attach::allgather; break;
    case CmaMode::off: comm.cross_memory_attach = Attach::off; break;
  }
  return comm;
}

}  // namespace copse::mpi
