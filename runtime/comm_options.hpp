#pragma once
// What both runtimes -- the thread Team (runtime/comm.hpp) and the MPI Team
// (runtime/mpi_comm.hpp) -- are told beyond planning, written once: arrival
// estimates and waits. TeamOptions and mpi::CommOptions add only what is
// their own (the thread Team's nodes and virtual clock; the MPI Team's
// nodes, windows, cross-memory attach and plan cache).

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "plan/arrival_monitor.hpp"
#include "plan/planner.hpp"

namespace copse {

// The runtimes' defaults, written once: CommOptionsBase below and the
// configuration's Options (config/config.hpp) both start from these (the
// algorithm names are plan/planner.hpp's).
namespace team_defaults {
inline constexpr std::chrono::seconds wait_report{60};
}  // namespace team_defaults

// PlanOptions (plan/planner.hpp): algorithms per collective, blocks, cost
// model (virtual time and block autotuning), grouping, form.
struct CommOptionsBase : PlanOptions {
  // Arrival estimates (Comm::edge) for an arrival-aware allreduce (slt, prr):
  // warm-up, smoothing, plans kept per shape (plan/arrival_monitor.hpp).
  ArrivalOptions arrival;
  // Waiting for a peer. By default a rank waits as long as the peer takes --
  // an application's ranks may arrive at a collective minutes apart -- and
  // every wait_report says on on_wait_report whom it is waiting for (the
  // default handler writes one line to stderr). With wait_timeout set, a
  // wait past it fails the collective on every rank with TimeoutError.
  std::optional<std::chrono::milliseconds> wait_timeout;
  std::chrono::milliseconds wait_report{team_defaults::wait_report};  // 0: never
  std::function<void(const std::string&)> on_wait_report;

  // UsageError for an unknown algorithm name, arrival options out of range,
  // a wait_timeout that is not positive or a negative wait_report.
  void check() const;
};

}  // namespace copse
