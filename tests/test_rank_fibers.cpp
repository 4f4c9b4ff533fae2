// Ranks as user-level tasks: wait_while_equal under a CooperativeYield (it
// yields instead of sleeping, and keeps its deadline, report and check), the
// idle sleep that wake_all ends, and RankThreads running bodies that wait for
// one another on fewer worker threads than bodies.

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/wait.hpp"
#include "emulator/emulator.hpp"

using namespace copse;

namespace {

// Stands for a scheduler's other tasks: each yield runs `other`, which may
// store to the word being waited on.
struct ScriptedYield final : CooperativeYield {
  std::function<void()> other;
  int calls = 0, again_calls = 0;
  void yield(const std::atomic<std::uint32_t>&, std::uint32_t, bool again) override {
    ++calls;
    if (again) ++again_calls;
    if (other) other();
  }
};

WaitPolicy within(std::chrono::milliseconds ms) {
  WaitPolicy p;
  p.deadline = std::chrono::steady_clock::now() + ms;
  return p;
}

}  // namespace

TEST_CASE("cooperative wait: yields while the word stands and returns once another task changes it") {
  std::atomic<std::uint32_t> word{7};
  ScriptedYield hook;
  hook.other = [&] {
    if (hook.calls == 5) word.store(8, std::memory_order_release);  // no wake_all: nobody sleeps
  };
  const YieldScope scope(&hook);
  CHECK(wait_while_equal(word, 7, within(std::chrono::seconds(10))) == 8);
  CHECK(hook.calls == 5);
  CHECK(hook.again_calls == 4);  // the first yield of a wait is not "again"
  // A word that differs already: no yield at all.
  CHECK(wait_while_equal(word, 7, within(std::chrono::seconds(10))) == 8);
  CHECK(hook.calls == 5);
}

TEST_CASE("cooperative wait: times out with the deadline's message, reports and checks while it waits") {
  std::atomic<std::uint32_t> word{0};
  ScriptedYield hook;
  hook.other = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
  const YieldScope scope(&hook);
  WaitPolicy p = within(std::chrono::milliseconds(450));
  p.timeout_message = [] { return std::string("rank 3 waited for rank 4"); };
  int reports = 0, checks = 0;
  p.report_every = std::chrono::milliseconds(100);
  p.report = [&] { ++reports; };
  p.check = [&] { ++checks; };
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(wait_while_equal(word, 0, p), "rank 3 waited for rank 4");
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(450));
  CHECK(reports >= 2);
  CHECK(checks >= 2);  // every kWaitSleepSlice (100 ms)
  CHECK(hook.calls > 100);

  // A check that throws ends the wait with its error.
  WaitPolicy dead = within(std::chrono::seconds(30));
  dead.check = [] { throw SystemError("peer gone"); };
  CHECK_THROWS_WITH(wait_while_equal(word, 0, dead), "peer gone");

  // Without a hook (after the scope) the same wait sleeps on the futex.
}

TEST_CASE("cooperative wait: an idle scheduler's sleep ends at the next wake_all") {
  std::atomic<std::uint32_t> word{0};
  std::atomic<bool> asleep{false};
  std::chrono::steady_clock::duration slept{};
  std::thread idle([&] {
    const std::uint32_t ticket = idle_enter();
    asleep = true;
    const auto t0 = std::chrono::steady_clock::now();
    idle_sleep(ticket, std::chrono::seconds(20));
    slept = std::chrono::steady_clock::now() - t0;
  });
  while (!asleep) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  word.store(1);
  wake_all(word);
  idle.join();
  CHECK(slept < std::chrono::seconds(10));  // woken, not timed out
}

TEST_CASE("concurrency: rank tasks on few workers wait for one another, in any order, thousands at once") {
  RankThreads threads;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  const int most = 256;  // a thread per rank there (emulator.cpp)
#else
  const int most = 4096;
#endif
  for (int n : {2, 64, most}) {
    INFO("n = " << n);
    // A chain from the last rank down to rank 0: rank r waits for rank r+1,
    // so the first ranks a worker starts all wait for ranks it starts last.
    auto step = std::make_unique<std::atomic<std::uint32_t>[]>(static_cast<std::size_t>(n) + 1);
    step[static_cast<std::size_t>(n)].store(1);
    std::vector<int> order;
    std::atomic<int> failures{0};
    std::mutex order_mutex;
    std::set<std::thread::id> ids;
    const std::function<void(int)> body = [&](int r) {
      try {
        const auto me = static_cast<std::size_t>(r);
        wait_while_equal(step[me + 1], 0, within(std::chrono::seconds(60)));
        {
          std::lock_guard<std::mutex> lock(order_mutex);  // never held across a wait
          order.push_back(r);
          ids.insert(std::this_thread::get_id());
        }
        step[me].store(1, std::memory_order_release);
        wake_all(step[me]);
      } catch (...) {
        failures.fetch_add(1);
      }
    };
    threads.start(n, body);
    threads.wait();
    CHECK(failures.load() == 0);
    REQUIRE(order.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) CHECK(order[static_cast<std::size_t>(i)] == n - 1 - i);
    CHECK(threads.size() == n);
    // One worker per core, not a thread per rank (except under sanitizers).
#if !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
    CHECK(ids.size() <= std::max<std::size_t>(1, std::thread::hardware_concurrency()));
#endif
  }
}

TEST_CASE("concurrency: a rank task that waits inside a catch block keeps its own exception") {
  // Every body waits inside its handler until all are in theirs, so the
  // tasks of one worker interleave their exception handling: each must still
  // see its own exception, and rethrow it intact.
  RankThreads threads;
  const int n = 48;
  std::atomic<std::uint32_t> in_handler{0};
  std::atomic<int> right{0};
  const std::function<void(int)> body = [&](int r) {
    try {
      throw std::runtime_error("rank " + std::to_string(r));
    } catch (const std::exception&) {
      const std::uint32_t now = in_handler.fetch_add(1) + 1;
      wake_all(in_handler);
      for (std::uint32_t seen = now; seen < static_cast<std::uint32_t>(n);)
        seen = wait_while_equal(in_handler, seen, within(std::chrono::seconds(60)));
      try {
        std::rethrow_exception(std::current_exception());
      } catch (const std::runtime_error& again) {
        if (std::string(again.what()) == "rank " + std::to_string(r)) right.fetch_add(1);
      }
    }
    if (std::uncaught_exceptions() == 0 && !std::current_exception()) right.fetch_add(1);
  };
  threads.start(n, body);
  threads.wait();
  CHECK(right.load() == 2 * n);
}

TEST_CASE("concurrency: a rank task passed over while its word stands still reads its deadline") {
  // Rank 0 waits for a word nobody changes: its worker passes it over while
  // the word stands, yet it must still run often enough to see its deadline
  // go by -- once the worker is idle, and while ranks 1..busy keep the
  // worker busy, passing a token round until rank 0 has given up.
  for (int busy : {0, 3}) {
    INFO("ranks keeping the worker busy: " << busy);
    RankThreads threads(1);
    std::atomic<std::uint32_t> never{0}, token{0};
    std::atomic<bool> timed_out{false};
    std::atomic<std::int64_t> late_ms{-1};
    const auto deadline = std::chrono::milliseconds(100);
    const std::function<void(int)> body = [&](int r) {
      if (r == 0) {
        const auto start = std::chrono::steady_clock::now();
        try {
          wait_while_equal(never, 0, within(deadline));
        } catch (const TimeoutError&) {
          timed_out = true;
        }
        const auto late = std::chrono::steady_clock::now() - start - deadline;
        late_ms = std::chrono::duration_cast<std::chrono::milliseconds>(late).count();
        return;
      }
      // Each passes once more after it has seen rank 0 give up, so that
      // every one of them gets its last turn.
      for (bool done = false; !done;) {
        std::uint32_t seen = token.load();
        while (static_cast<int>(seen % static_cast<std::uint32_t>(busy)) != r - 1)
          seen = wait_while_equal(token, seen, within(std::chrono::seconds(60)));
        done = timed_out;
        token.fetch_add(1);
        wake_all(token);
      }
    };
    threads.start(1 + busy, body);
    threads.wait();
    CHECK(timed_out);
    CHECK(late_ms >= 0);
    CHECK(late_ms < 2000);
  }
}
