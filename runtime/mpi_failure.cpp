#include <sched.h>

#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "runtime/mpi_team_state.hpp"

// The team's failure record: the first error on a node is written to the
// segment's NodeShared (so every rank of the node rethrows it) and sent to
// every other process as a notice (so ranks of other nodes stop waiting too).

namespace copse::mpi {

namespace {

[[noreturn]] void throw_as(ErrorKind kind, const std::string& message) {
  switch (kind) {
    case ErrorKind::usage: throw UsageError(message);
    case ErrorKind::schedule: throw ScheduleError(message);
    case ErrorKind::timeout: throw TimeoutError(message);
    case ErrorKind::aborted: throw LinkAborted();
    case ErrorKind::failed: throw RunFailure(message);
    case ErrorKind::system: throw SystemError(message);
  }
  throw RunFailure(message);
}

std::pair<ErrorKind, std::string> describe_exception(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    return {x.kind(), x.what()};
  } catch (const std::exception& x) {
    return {ErrorKind::failed, x.what()};
  } catch (...) {
    return {ErrorKind::failed, "unknown exception"};
  }
}

}  // namespace

std::string TeamState::peer_gone(int peer) const {
  const int q = layout.process(peer);
  const auto it = watches.find(q);
  if (it == watches.end() || !it->second->gone()) return "";
  return "its process (MPI rank " + std::to_string(q) + ", pid " + std::to_string(it->second->pid()) + ") has died";
}

void TeamState::record_failure(std::exception_ptr e) noexcept {
  const auto [kind, text] = describe_exception(e);
  bool from_peer = false;
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure&) {
    from_peer = true;
  } catch (...) {
  }
  if (node && node->failure_claimed.exchange(1, std::memory_order_acq_rel) == 0) {
    first_error.record(e);
    node->failure_kind = static_cast<std::int32_t>(kind);
    const std::size_t n = std::min(text.size(), sizeof node->failure_text - 1);
    std::memcpy(node->failure_text, text.data(), n);
    node->failure_text[n] = '\0';
    node->failure_ready.store(1, std::memory_order_release);
  }
  // Ranks of other nodes may wait for this one: tell them (a notice that
  // came from elsewhere has been told already).
  if (!from_peer && channel) channel->notify(kind, text);
}

void TeamState::rethrow_failure() {
  first_error.rethrow_if_any();
  // Another process of the node failed first: it wrote the record before
  // aborting the engine, so an aborted rank finds it (give a writer that is
  // between its claim and its text a moment).
  for (int i = 0; i < 1000 && node && node->failure_claimed.load(std::memory_order_acquire); ++i) {
    if (node->failure_ready.load(std::memory_order_acquire))
      throw_as(static_cast<ErrorKind>(node->failure_kind), node->failure_text);
    sched_yield();
  }
  if (std::current_exception()) throw;
  throw LinkAborted();
}

}  // namespace copse::mpi
