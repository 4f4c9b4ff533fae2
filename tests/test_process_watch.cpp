// The watches of the MPI runtime (runtime/process_watch.hpp) between
// processes that are on "other hosts" as far as the watch can tell (a card
// whose host name differs): a forked child opens its listener and welcomes
// the parent, which watches it over TCP on the loopback. Killed, the child
// is seen dead by a sweep; leaving in order (its goodbye), it is not; a
// connection whose token is not the child's never becomes a watch.

#include <arpa/inet.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "runtime/process_watch.hpp"

using namespace copse;

namespace {

enum class ChildEnd { killed, goodbye };

// A child with a listener that waits for one watcher, then (once the parent
// writes a byte) ends as `end` says. Returns its pid and card.
std::pair<pid_t, WatchCard> start_watched_child(ChildEnd end, int& go_fd) {
  int card_pipe[2], go_pipe[2];
  REQUIRE(pipe(card_pipe) == 0);
  REQUIRE(pipe(go_pipe) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    {
      ProcessWatches mine;
      const WatchCard card = mine.card();
      if (write(card_pipe[1], &card, sizeof card) != static_cast<ssize_t>(sizeof card)) _exit(2);
      mine.handshake(1, std::chrono::seconds(5));
      char go = 0;
      if (read(go_pipe[0], &go, 1) != 1) _exit(3);
      if (end == ChildEnd::killed) raise(SIGKILL);
    }  // the goodbye
    _exit(0);
  }
  close(card_pipe[1]);
  close(go_pipe[0]);
  WatchCard card;
  REQUIRE(read(card_pipe[0], &card, sizeof card) == static_cast<ssize_t>(sizeof card));
  close(card_pipe[0]);
  go_fd = go_pipe[1];
  std::strcpy(card.host, "another-host");  // not this host: watched over TCP, not by pidfd
  card.ipv4 = htonl(INADDR_LOOPBACK);
  return {child, card};
}

// Sweeps until a death is found or `patience` has passed.
std::optional<int> sweep_for(ProcessWatches& w, std::chrono::milliseconds patience) {
  const auto until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    if (auto dead = w.sweep(std::chrono::milliseconds(0))) return dead;
    if (std::chrono::steady_clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void end_child(pid_t child, int go_fd) {
  REQUIRE(write(go_fd, "x", 1) == 1);
  close(go_fd);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
}

}  // namespace

TEST_CASE("process watch: a killed process of another host is seen dead over TCP, one that says goodbye is not",
          "[process_watch]") {
  for (const ChildEnd end : {ChildEnd::killed, ChildEnd::goodbye}) {
    int go_fd = -1;
    const auto [child, card] = start_watched_child(end, go_fd);
    ProcessWatches watcher;
    (void)watcher.card();
    watcher.watch(7, child, card);
    watcher.handshake(0, std::chrono::seconds(5));
    REQUIRE(watcher.remote() == std::vector<int>{7});
    CHECK_FALSE(watcher.gone(7));
    CHECK_FALSE(watcher.sweep(std::chrono::milliseconds(0)));
    end_child(child, go_fd);
    const std::optional<int> dead = sweep_for(watcher, std::chrono::milliseconds(end == ChildEnd::killed ? 5000 : 200));
    if (end == ChildEnd::killed) {
      CHECK(dead == 7);
      CHECK(watcher.gone(7));
    } else {
      CHECK_FALSE(dead);
      CHECK_FALSE(watcher.gone(7));
      CHECK(watcher.remote().empty());  // the watch ended with the goodbye
    }
  }
}

TEST_CASE("process watch: a connection that does not bring the watched process's token is no watch",
          "[process_watch]") {
  int go_fd = -1;
  auto [child, card] = start_watched_child(ChildEnd::killed, go_fd);
  card.token ^= 1;  // another process's listener, as far as the watcher can tell
  ProcessWatches watcher;
  (void)watcher.card();
  watcher.watch(3, child, card);
  watcher.handshake(0, std::chrono::seconds(5));
  CHECK(watcher.remote().empty());
  end_child(child, go_fd);
  CHECK_FALSE(sweep_for(watcher, std::chrono::milliseconds(100)));
  CHECK_FALSE(watcher.gone(3));
}
