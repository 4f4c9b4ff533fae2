#pragma once
// Whether the other processes of an MPI team are still there (the MPI
// runtime's LinkConfig::peer_gone, runtime/mpi_failure.cpp):
//
//  - a process of this host: a pidfd (ProcessWatch);
//  - a process of another host: a TCP connection to it (RemoteWatch), made
//    while the team is set up. The watched process never reads it: the
//    kernel keeps it open exactly as long as the process lives, so its end
//    without a goodbye byte is the process's death, seen from anywhere on
//    the network, with no heartbeat and nothing on any hot path.
//
// ProcessWatches holds a process's watches and looks at all of them at
// once (sweep): a rank that waits looks at most once per kWaitSleepSlice,
// so a death is seen by whoever watches the dead process while it waits for
// anything -- also a rank alone on its node, which no node peer watches.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace copse {

// Whether a process of this host is still there: a pidfd (readable once the
// process has ended, zombie or not, and never confused by a reused pid), or
// kill(pid, 0) where pidfds are missing.
class ProcessWatch {
 public:
  explicit ProcessWatch(pid_t pid);
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  pid_t pid() const { return pid_; }
  bool gone() const;
  int fd() const { return fd_; }  // -1: no pidfd

 private:
  pid_t pid_;
  int fd_ = -1;
};

// How a process can be watched from another host, as every process learns
// it at set-up (sent as bytes): its host (name and boot id: two processes
// share a host only if both agree, so a pidfd never watches another
// machine's pid), where its watch listener takes connections (IPv4, network
// order; port 0: none), and a random token that its listener sends to every
// watcher, so that a connection that reached some other process (an
// address that names another machine elsewhere) is never taken for a watch.
struct WatchCard {
  char host[64] = {};
  char boot[40] = {};
  std::uint32_t ipv4 = 0;
  std::uint16_t port = 0;
  std::uint16_t unused = 0;
  std::uint64_t token = 0;

  bool same_host(const WatchCard& other) const;
};

// A process of another host, watched over a TCP connection to its
// listener: connecting, then waiting for its token (a watch only once the
// token has come), then watching: the end of the connection without the
// goodbye byte is the process's death.
class RemoteWatch {
 public:
  enum class State { connecting, watching, ended, dead, failed };
  explicit RemoteWatch(const WatchCard& card);  // starts connecting (failed: no listener or no socket)
  ~RemoteWatch();
  RemoteWatch(const RemoteWatch&) = delete;
  RemoteWatch& operator=(const RemoteWatch&) = delete;
  // Takes what the socket says (`events`: poll's revents for fd()) and
  // returns the new state. ended: the process left in order (goodbye);
  // failed: never became a watch (connection refused, wrong token, ...).
  State advance(short events);
  State state() const { return state_; }
  int fd() const { return fd_; }
  short events() const;  // what to poll for in this state

 private:
  State state_ = State::failed;
  int fd_ = -1;
  std::uint64_t token_ = 0;
  unsigned char got_[8] = {};
  std::size_t have_ = 0;
  bool connected_ = false;
};

// Ignores SIGPIPE if nobody handles it (its disposition is the default), for
// a process whose MPI traffic crosses hosts: Open MPI's TCP transport writes
// to its connections without MSG_NOSIGNAL, so its first write to a peer that
// died kills the writer -- a survivor -- silently, before it can say whom it
// lost. Ignored, the write fails with EPIPE and MPI reports it. An
// application's own handler is left alone.
void ignore_broken_pipes_unless_handled();

// This process's watches of the team's other processes, and its own
// listener (whose accepted connections its watchers hold). Thread-safe.
class ProcessWatches {
 public:
  ProcessWatches();
  ~ProcessWatches();  // says goodbye to every watcher
  ProcessWatches(const ProcessWatches&) = delete;
  ProcessWatches& operator=(const ProcessWatches&) = delete;

  // This process's card (the listener is opened on first call).
  const WatchCard& card();
  // Watches `process`: by pidfd when it shares this host, else over TCP.
  void watch(int process, pid_t pid, const WatchCard& card);
  // Closes the listener (no process will watch this one: a single host).
  void close_listener();
  // Completes the set-up's connections: accepts `watchers` connections and
  // waits for the tokens of the remote watches, for at most `patience`
  // (what is still open then completes in later sweeps).
  void handshake(int watchers, std::chrono::milliseconds patience);

  // Whether `process` is watched and known to have died.
  bool gone(int process);
  // Looks at every watch (at most once per `every` across the process's
  // threads; else only remembers): a process found dead, if any.
  std::optional<int> sweep(std::chrono::steady_clock::duration every);
  // The processes watched over TCP (watching, not ended), for messages.
  std::vector<int> remote() const;

 private:
  struct Entry {
    std::unique_ptr<ProcessWatch> local;
    std::unique_ptr<RemoteWatch> remote;
  };
  // Polls every watch and the listener once (mutex_ held): the first dead process, or -1.
  int look_all(int timeout_ms);
  void accept_watchers();

  mutable std::mutex mutex_;
  std::map<int, Entry> entries_;
  std::optional<WatchCard> card_;
  int listener_ = -1;
  std::vector<int> watchers_;  // accepted connections (goodbye at the end)
  std::atomic<int> dead_{-1};
  std::atomic<std::int64_t> next_sweep_{0};  // steady_clock ticks
};

}  // namespace copse
