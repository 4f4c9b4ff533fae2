#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/wait.hpp"
#include "runtime/mpi_team_state.hpp"

// The team's failure record: the first error on a node is written to the
// segment's NodeShared (so every rank of the node rethrows it) and sent to
// every other process as a notice (so ranks of other nodes stop waiting too),
// and the watches on the team's other processes (runtime/process_watch.hpp)
// that tell a waiting rank when one of them died.

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

// How long the set-up waits for the watches between hosts to connect (the
// rest completes in later looks; a death before then goes unseen by them).
constexpr std::chrono::milliseconds kWatchHandshake{500};

// How long a rank that failed keeps MPI progressing so that its notices
// leave (an eager send over TCP only moves while MPI is called, and a first
// one must even connect: milliseconds on a LAN, while the receiver polls).
// Bounded because a receiver that is not in MPI never completes it, and
// short because the failing rank reports only afterwards (Open MPI's runtime
// ends the job about a second after a death, abort on exit on). Notices to
// processes known dead or of this node (which have the node's record) are
// not waited for.
constexpr std::chrono::milliseconds kNoticePatience{300};

}  // namespace

// Every process watches the team's other processes of its host (pidfds);
// across hosts, each process is watched from the next host (in order of the
// hosts' first processes) by the process at its index modulo that host's
// size: one TCP connection per process, and a rank alone on its node or
// host is watched like any other.
void TeamState::start_watches() {
  const int processes = static_cast<int>(pid_of.size());
  const WatchCard mine = watches.card();
  cards.assign(static_cast<std::size_t>(processes), WatchCard{});
  check_mpi(PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, cards.data(), sizeof mine, MPI_BYTE, dup),
            "MPI_Allgather (process watches)");
  std::vector<std::vector<int>> hosts;  // processes by host, hosts in order of their first
  std::vector<int> host_of(static_cast<std::size_t>(processes)), index_on_host(host_of.size());
  for (int q = 0; q < processes; ++q) {
    const WatchCard& c = cards[static_cast<std::size_t>(q)];
    std::size_t h = 0;
    while (h < hosts.size() && !cards[static_cast<std::size_t>(hosts[h].front())].same_host(c)) ++h;
    if (h == hosts.size()) hosts.emplace_back();
    host_of[static_cast<std::size_t>(q)] = static_cast<int>(h);
    index_on_host[static_cast<std::size_t>(q)] = static_cast<int>(hosts[h].size());
    hosts[h].push_back(q);
  }
  const auto me = static_cast<std::size_t>(process);
  const auto watch = [&](int q) {
    watches.watch(q, static_cast<pid_t>(pid_of[static_cast<std::size_t>(q)]), cards[static_cast<std::size_t>(q)]);
  };
  for (int q : hosts[static_cast<std::size_t>(host_of[me])])
    if (q != process) watch(q);
  if (hosts.size() == 1) {
    watches.close_listener();
    return;
  }
  ignore_broken_pipes_unless_handled();  // a survivor's write to a dead peer must not kill it
  const std::size_t h = static_cast<std::size_t>(host_of[me]);
  const auto& previous = hosts[(h + hosts.size() - 1) % hosts.size()];
  const std::size_t here = hosts[h].size();
  for (std::size_t i = 0; i < previous.size(); ++i)
    if (i % here == static_cast<std::size_t>(index_on_host[me])) watch(previous[i]);
  watches.handshake(mine.port != 0 && mine.ipv4 != 0 ? 1 : 0, kWatchHandshake);
}

std::string TeamState::process_name(int q) const {
  const WatchCard& c = cards[static_cast<std::size_t>(q)];
  return "MPI rank " + std::to_string(q) + " (pid " + std::to_string(pid_of[static_cast<std::size_t>(q)]) +
         " on host " + std::string(c.host, strnlen(c.host, sizeof c.host)) + ")";
}

// The awaited peer's process first (as the wait asks), then every watch at
// most once per sleep slice: a rank that waits for anything notices the
// death of a process it watches, wherever that process is.
std::string TeamState::peer_gone(int peer) const {
  const int q = layout.process(peer);
  if (q != process && watches.gone(q)) return "its process, " + process_name(q) + ", has died";
  if (const auto dead = watches.sweep(kWaitSleepSlice)) return process_name(*dead) + " has died";
  return "";
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
  // The node's ranks stop now (the executor aborts the engine too, but only
  // after this returns, and the notices below may take a while).
  if (engine) engine->abort();
  // Ranks of other nodes may wait for this one: tell them (a notice that
  // came from elsewhere has been told already), and see the notices leave.
  if (!from_peer && channel) {
    const auto dead = [this](int q) { return watches.gone(q); };
    channel->notify(kind, text, dead);
    channel->push_notices(kNoticePatience, [&](int q) {
      return std::any_of(node_members.begin(), node_members.end(), [&](int r) { return layout.process(r) == q; }) ||
             dead(q);
    });
  }
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
