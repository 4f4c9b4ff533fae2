#include "runtime/process_watch.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

namespace copse {

namespace {

// The goodbye a listener's process sends its watchers when it leaves in order.
constexpr char kWatchGoodbye = 'B';

// Interfaces that exist under the same address on many machines (container
// and virtual-machine bridges): an address of theirs would reach this
// machine's own, not the watched process's.
bool watch_address_shared_by_hosts(const char* name) {
  for (const char* prefix : {"docker", "virbr", "veth", "br-", "cni", "flannel", "lxc"})
    if (std::strncmp(name, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

// The IPv4 address (network order) other hosts reach this one by:
// COPSE_WATCH_ADDRESS if set, else the first interface that is up, not the
// loopback and not a bridge of watch_address_shared_by_hosts; 0 if none.
std::uint32_t watch_address() {
  if (const char* given = std::getenv("COPSE_WATCH_ADDRESS"); given && *given) {
    in_addr a{};
    return inet_pton(AF_INET, given, &a) == 1 ? a.s_addr : 0;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return 0;
  std::uint32_t best = 0, fallback = 0;
  for (const ifaddrs* i = list; i && !best; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    const std::uint32_t a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    if (watch_address_shared_by_hosts(i->ifa_name)) {
      if (!fallback) fallback = a;
    } else {
      best = a;
    }
  }
  freeifaddrs(list);
  return best ? best : fallback;
}

// A listening TCP socket on every interface and a port of the kernel's
// choice (non-blocking); -1 if none can be made.
int open_watch_listener(std::uint16_t& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
    close(fd);
    return -1;
  }
  port = a.sin_port;
  return fd;
}

}  // namespace

void ignore_broken_pipes_unless_handled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) return;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

// ---- ProcessWatch -----------------------------------------------------------------

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid) {
#ifdef SYS_pidfd_open
  fd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) close(fd_);
}

bool ProcessWatch::gone() const {
  if (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  return kill(pid_, 0) != 0 && errno == ESRCH;
}

// ---- WatchCard, RemoteWatch -------------------------------------------------------

bool WatchCard::same_host(const WatchCard& other) const {
  return std::strncmp(host, other.host, sizeof host) == 0 && std::strncmp(boot, other.boot, sizeof boot) == 0;
}

RemoteWatch::RemoteWatch(const WatchCard& card) : token_(card.token) {
  if (card.port == 0 || card.ipv4 == 0) return;
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = card.ipv4;
  a.sin_port = card.port;
  if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS) {
    close(fd_);
    fd_ = -1;
    return;
  }
  state_ = State::connecting;
}

RemoteWatch::~RemoteWatch() {
  if (fd_ >= 0) close(fd_);
}

short RemoteWatch::events() const {
  if (state_ != State::connecting && state_ != State::watching) return 0;
  // Connecting: writable once connected (or refused); then the token and,
  // while watching, the goodbye or the end are reads.
  return state_ == State::connecting && !connected_ ? POLLOUT : POLLIN;
}

RemoteWatch::State RemoteWatch::advance(short events) {
  if (events == 0 || fd_ < 0) return state_;
  const auto finish = [this](State s) {
    close(fd_);
    fd_ = -1;
    return state_ = s;
  };
  if (state_ == State::connecting && !connected_) {
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) return finish(State::failed);
    connected_ = true;
    return state_;
  }
  if (state_ == State::connecting) {
    const ssize_t n = recv(fd_, got_ + have_, sizeof got_ - have_, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return state_;
    if (n <= 0) return finish(State::failed);  // ended before its token: never a watch
    have_ += static_cast<std::size_t>(n);
    if (have_ < sizeof got_) return state_;
    std::uint64_t token = 0;
    std::memcpy(&token, got_, sizeof token);
    if (token != token_) return finish(State::failed);
    return state_ = State::watching;
  }
  if (state_ == State::watching) {
    char byte = 0;
    const ssize_t n = recv(fd_, &byte, 1, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return state_;
    if (n == 1 && byte == kWatchGoodbye) return finish(State::ended);
    return finish(State::dead);  // the end without a goodbye (or a reset): the process is gone
  }
  return state_;
}

// ---- ProcessWatches ---------------------------------------------------------------

ProcessWatches::ProcessWatches() = default;

ProcessWatches::~ProcessWatches() {
  for (int fd : watchers_) {
    (void)send(fd, &kWatchGoodbye, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  }
  if (listener_ >= 0) close(listener_);
}

const WatchCard& ProcessWatches::card() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (card_) return *card_;
  WatchCard c;
  gethostname(c.host, sizeof c.host - 1);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot >> id) std::memcpy(c.boot, id.data(), std::min(id.size(), sizeof c.boot - 1));
  listener_ = open_watch_listener(c.port);
  c.ipv4 = c.port ? watch_address() : 0;
  std::random_device random;
  c.token = (static_cast<std::uint64_t>(random()) << 32) ^ random() ^ static_cast<std::uint64_t>(getpid());
  card_ = c;
  return *card_;
}

void ProcessWatches::watch(int process, pid_t pid, const WatchCard& card) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry& e = entries_[process];
  if (card_ && card.same_host(*card_))
    e.local = std::make_unique<ProcessWatch>(pid);
  else
    e.remote = std::make_unique<RemoteWatch>(card);
}

void ProcessWatches::close_listener() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (listener_ >= 0) close(listener_);
  listener_ = -1;
}

void ProcessWatches::accept_watchers() {
  for (;;) {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    // 8 bytes into a new connection's empty buffer: they go at once, whole.
    if (send(fd, &card_->token, sizeof card_->token, MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof card_->token)) {
      close(fd);
      continue;
    }
    watchers_.push_back(fd);
  }
}

int ProcessWatches::look_all(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<int> whose;  // per pollfd: the process, or -1 for the listener
  if (listener_ >= 0) {
    fds.push_back({listener_, POLLIN, 0});
    whose.push_back(-1);
  }
  int found = -1;
  for (auto& [process, e] : entries_) {
    if (e.local && e.local->fd() < 0) {
      if (found < 0 && e.local->gone()) found = process;
      continue;
    }
    const short events = e.local ? short{POLLIN} : e.remote->events();
    if (events == 0) continue;
    fds.push_back({e.local ? e.local->fd() : e.remote->fd(), events, 0});
    whose.push_back(process);
  }
  if (fds.empty() || poll(fds.data(), fds.size(), timeout_ms) <= 0) return found;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    if (whose[i] < 0) {
      accept_watchers();
      continue;
    }
    Entry& e = entries_[whose[i]];
    const bool dead = e.local ? true : e.remote->advance(fds[i].revents) == RemoteWatch::State::dead;
    if (dead && found < 0) found = whose[i];
  }
  return found;
}

void ProcessWatches::handshake(int watchers, std::chrono::milliseconds patience) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    const bool connecting = std::any_of(entries_.begin(), entries_.end(), [](const auto& e) {
      return e.second.remote && e.second.remote->state() == RemoteWatch::State::connecting;
    });
    if (!connecting && static_cast<int>(watchers_.size()) >= watchers) return;
    if (std::chrono::steady_clock::now() >= until) return;
    const int found = look_all(5);
    if (found >= 0) dead_.store(found, std::memory_order_release);
  }
}

bool ProcessWatches::gone(int process) {
  if (dead_.load(std::memory_order_acquire) == process) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = entries_.find(process);
  if (it == entries_.end()) return false;
  if (it->second.local) return it->second.local->gone();
  return it->second.remote->state() == RemoteWatch::State::dead;
}

std::optional<int> ProcessWatches::sweep(std::chrono::steady_clock::duration every) {
  const auto remembered = [this]() -> std::optional<int> {
    const int d = dead_.load(std::memory_order_acquire);
    return d >= 0 ? std::optional<int>(d) : std::nullopt;
  };
  const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::int64_t next = next_sweep_.load(std::memory_order_relaxed);
  if (now < next || !next_sweep_.compare_exchange_strong(next, now + every.count())) return remembered();
  std::lock_guard<std::mutex> lock(mutex_);
  if (dead_.load(std::memory_order_acquire) < 0) {
    const int found = look_all(0);
    if (found >= 0) dead_.store(found, std::memory_order_release);
  }
  return remembered();
}

std::vector<int> ProcessWatches::remote() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> out;
  for (const auto& [process, e] : entries_)
    if (e.remote && e.remote->state() == RemoteWatch::State::watching) out.push_back(process);
  return out;
}

}  // namespace copse
