// The link engine's stage slots (transport/link_words.hpp, "Stage slots"):
// with staged sends a rank's sends wait only for the receiver of the post
// LinkEngine::kStageSlots sends back, and every receiver takes a sender's
// posts in the order they were sent. Thread ranks over a HeapArena, staged
// as the MPI layer's processes are, on hand-made steps.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "exec/step_executor.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"

using namespace copse;

namespace {

constexpr std::size_t kStageBytes = 1024;  // parts of 512 bytes: 128 int32 elements

// One node of `ranks` thread ranks over a HeapArena, staged sends, no clock.
struct StagedNode {
  HeapArena arena;
  Arena::Offset shared;
  LinkEngine engine;
  explicit StagedNode(int ranks)
      : shared(LinkEngine::create_shared(arena, ranks)),
        engine(arena, shared,
               executor_config(RankMap::uniform(ranks, ranks), std::nullopt,
                               wait_settings(std::chrono::milliseconds(5000), "round")),
               [] {
                 LinkConfig link;
                 link.staged_sends = true;
                 return link;
               }()) {
    for (int r = 0; r < ranks; ++r) engine.set_stage(r, arena.address(arena.allocate(kStageBytes, 64)), kStageBytes);
  }
};

Step send_to(int peer, std::uint64_t offset, std::uint64_t count) {
  Step s;
  s.send = Transfer{peer, offset, count};
  return s;
}
Step recv_from(int peer, std::uint64_t offset, std::uint64_t count) {
  Step s;
  s.recv = Transfer{peer, offset, count};
  return s;
}

// Runs `steps[r]` on rank r's `y[r]` for `rounds` rounds, one thread per
// rank, calling `before(r, round)` ahead of each of rank r's runs and
// `after(r, round)` once it returned (then `check(r, round)` too). Returns
// each rank's error ("" if none).
using Hook = std::function<void(int rank, int round)>;
std::vector<std::string> run_ranks(StagedNode& node, const std::vector<std::vector<Step>>& steps,
                                   std::vector<std::vector<std::int32_t>>& y, int rounds, const Hook& before,
                                   const Hook& after) {
  const ReduceOp op = builtin_op("sum", DType::int32);
  const auto p = steps.size();
  std::vector<std::string> error(p);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      LinkRank c;
      c.rank = static_cast<int>(r);
      try {
        for (int round = 0; round < rounds; ++round) {
          before(static_cast<int>(r), round);
          c.round = round;
          StepExecutor(node.engine).run(c, steps[r], reinterpret_cast<std::byte*>(y[r].data()), nullptr, op);
          after(static_cast<int>(r), round);
        }
      } catch (const std::exception& e) {
        error[r] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  return error;
}

std::int32_t value(std::size_t i, int round) { return static_cast<std::int32_t>(7 * i + 1000 * round + 1); }

}  // namespace

TEST_CASE("stage slots: a staged sender posts two sends and returns before its receiver pulls either", "[link]") {
  // Rank 1 begins to receive only once rank 0's run has returned: with one
  // outbox, rank 0's second send would wait for rank 1's first pull, and
  // both would time out. Each send fits a part of the stage (400 bytes).
  StagedNode node(2);
  const std::vector<std::vector<Step>> steps = {{send_to(1, 0, 100), send_to(1, 100, 100)},
                                                {recv_from(0, 0, 100), recv_from(0, 100, 100)}};
  std::vector<std::vector<std::int32_t>> y = {std::vector<std::int32_t>(200), std::vector<std::int32_t>(200, -1)};
  for (std::size_t i = 0; i < 200; ++i) y[0][i] = value(i, 0);
  std::atomic<bool> sender_returned{false};
  const auto error = run_ranks(
      node, steps, y, 1,
      [&](int r, int) {
        // Bounded: a sender that times out never sets the flag.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        if (r == 1)
          while (!sender_returned.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      },
      [&](int r, int) {
        if (r == 0) sender_returned.store(true);
      });
  CHECK(error == std::vector<std::string>(2));
  CHECK(y[1] == y[0]);
}

TEST_CASE("stage slots: receivers take each sender's posts in order, of every size, however they interleave",
          "[link]") {
  // Rank 0 sends rank 1 and rank 2 messages in a mixed order and of mixed
  // sizes: in the outbox's own line (<= 16 bytes), in a part of the stage
  // (<= 512 bytes, 128 elements), and larger ones that take the whole stage
  // (up to 1024 bytes); messages to one receiver differ in size where they
  // follow each other, so a post taken out of order is a size mismatch,
  // and lie at distinct offsets with distinct values, so a wrong copy shows.
  // Rank 1 also sends rank 2 a few, so rank 2 takes two senders' posts.
  // Many rounds, the receivers sometimes late (a yield before their run),
  // so that both outboxes fill and empty in every order.
  struct Message {
    int from, to;
    std::uint64_t count;
  };
  const std::vector<Message> messages = {{0, 1, 2},   {0, 1, 100}, {0, 2, 3},   {0, 1, 4},   {0, 2, 200}, {0, 2, 128},
                                         {0, 1, 129}, {1, 2, 50},  {0, 1, 128}, {0, 2, 1},   {0, 2, 256}, {1, 2, 4},
                                         {0, 1, 60},  {0, 2, 127}, {0, 1, 250}, {1, 2, 130}, {0, 2, 2},   {0, 1, 16}};
  std::vector<std::vector<Step>> steps(3);
  std::uint64_t offset = 0;
  for (const Message& m : messages) {
    steps[static_cast<std::size_t>(m.from)].push_back(send_to(m.to, offset, m.count));
    steps[static_cast<std::size_t>(m.to)].push_back(recv_from(m.from, offset, m.count));
    offset += m.count;
  }
  // Every send is a copy, done once posted, and a post waits only for
  // pulls of earlier posts, whose receivers wait for nothing later: no
  // order of the list above can deadlock.
  const std::size_t n = offset;
  StagedNode node(3);
  std::vector<std::vector<std::int32_t>> y(3, std::vector<std::int32_t>(n));
  constexpr int kRounds = 300;
  std::vector<std::string> wrong(3);
  const auto error = run_ranks(
      node, steps, y, kRounds,
      [&](int r, int round) {
        // Each rank's vector holds its own sends' values and -1 elsewhere.
        for (std::size_t i = 0; i < n; ++i) y[static_cast<std::size_t>(r)][i] = -1;
        std::uint64_t at = 0;
        for (const Message& m : messages) {
          if (m.from == r)
            for (std::uint64_t i = at; i < at + m.count; ++i) y[static_cast<std::size_t>(r)][i] = value(i, round);
          at += m.count;
        }
        if (r > 0 && round % 3 == 0) std::this_thread::yield();
      },
      [&](int r, int round) {
        std::uint64_t at = 0;
        for (const Message& m : messages) {
          const bool mine = m.from == r || m.to == r;
          for (std::uint64_t i = at; i < at + m.count && wrong[static_cast<std::size_t>(r)].empty(); ++i)
            if (y[static_cast<std::size_t>(r)][i] != (mine ? value(i, round) : -1))
              wrong[static_cast<std::size_t>(r)] =
                  "round " + std::to_string(round) + ": element " + std::to_string(i) + " wrong";
          at += m.count;
        }
      });
  CHECK(error == std::vector<std::string>(3));
  CHECK(wrong == std::vector<std::string>(3));
}
