// The link engine with ranks that are processes: the parent creates one
// Boost.Interprocess segment (a ShmArena) holding the link state and every
// rank's buffers, forks k children, and each child maps the segment afresh
// by name (at its own address: only offsets are shared), runs its rank of a
// registry schedule through the link engine with cross-process futexes, and
// checks its result against the sequential reference. The parent waits with
// a deadline and fails clearly if a child hangs, crashes or reports an error;
// the segment is removed at the end whatever happens.
//
// Staged cases run as the MPI layer's processes do: working buffers private
// to each process, sends staged in the segment or, with cross-memory attach,
// read straight out of the sender's private buffer.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "exec/step_executor.hpp"
#include "transport/arena.hpp"
#include "transport/link_engine.hpp"

using namespace copse;

namespace {

constexpr int kMaxRanks = 8;
constexpr std::size_t kMessageBytes = 512;

// What the parent leaves in the segment for the children (at the arena's root).
struct Root {
  Arena::Offset link = 0;
  Arena::Offset buffer[kMaxRanks] = {};
  Arena::Offset scratch[kMaxRanks] = {};
  Arena::Offset stage[kMaxRanks] = {};
  Picos finish[kMaxRanks] = {};
  std::uint64_t attached[kMaxRanks] = {};   // bytes each rank read by cross-memory attach
  std::atomic<int> reaped[kMaxRanks] = {};  // set by the parent once it has reaped the rank's process
  char message[kMaxRanks][kMessageBytes] = {};
};

// Removes the segment when the test ends, passed or failed.
struct SegmentGuard {
  std::string name;
  ~SegmentGuard() { ShmArena::remove(name); }
};

std::string unique_segment_name() {
  static int serial = 0;
  return "/copse-test-" + std::to_string(getpid()) + "-" + std::to_string(serial++);
}

struct ArenaCase {
  const AlgorithmInfo* algorithm;
  Shape shape;
  ReduceOp op;
  ExecutorConfig run;    // the executor's (and the engine's) settings
  LinkConfig link;       // the shared-memory transport's own
  int absent_rank = -1;  // a rank whose process exits without taking part
  // Staged sends: private working buffers, a stage of this many bytes per
  // rank in the segment (0: buffers in the segment, no stage).
  std::size_t stage_bytes = 0;
  // Rank 0 posts its first send and exits at once, leaving its post behind
  // (its receiver then reads from a process that is gone).
  bool sender_dies = false;
};

void put_message(char* out, const std::string& text) {
  const std::size_t n = std::min(text.size(), kMessageBytes - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

// A child: map the segment by name, run one rank, report. Never returns.
[[noreturn]] void child_main(const std::string& name, const ArenaCase& cs, int rank) {
  int status = 3;
  char* message = nullptr;
  std::unique_ptr<ShmArena> mapping;  // outlives the try block: `message` points into it
  try {
    mapping = std::make_unique<ShmArena>(ShmArena::Open{}, name);
    ShmArena& arena = *mapping;
    Root* root = arena.at<Root>(arena.root());
    message = root->message[rank];
    if (rank == cs.absent_rank) _exit(0);
    if (cs.sender_dies && rank != 0) {
      // Read rank 0's post only once its process is gone.
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!root->reaped[0].load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    LinkEngine engine(arena, root->link, cs.run, cs.link);
    std::vector<Step> steps;
    const std::uint64_t n = cs.shape.count;
    const std::uint64_t staged = compile_steps(cs.algorithm->plan(cs.shape), rank, cs.shape.ranks, n, steps);
    // Process ranks work on buffers in the segment: the input is copied in
    // (here generated in place) and the result read out of it. With staged
    // sends, on private memory.
    std::vector<std::byte> own(cs.stage_bytes > 0 ? (n + staged) * cs.op.element_bytes + 64 : 0);
    std::byte* y = cs.stage_bytes > 0 ? own.data() : arena.address(root->buffer[rank]);
    std::byte* scratch = cs.stage_bytes > 0 ? own.data() + n * cs.op.element_bytes : arena.address(root->scratch[rank]);
    fill_input(cs.op, rank, n, y);
    LinkRank c;
    c.rank = rank;
    c.clock = RankClock(cs.run.model.ports());
    if (cs.stage_bytes > 0) engine.set_stage(rank, arena.address(root->stage[rank]), cs.stage_bytes);
    if (cs.sender_dies && rank == 0) {
      // The executor's set-up of a run, then the post, then gone.
      c.eb = cs.op.element_bytes;
      c.op = &cs.op;
      engine.publish_start(c);
      engine.start_send(c, steps.front().send, y + steps.front().send.offset * c.eb);
      _exit(0);
    }
    for (int round = 0; round < 3; ++round) {  // repeated runs reuse the link state
      if (round > 0) fill_input(cs.op, rank, n, y);
      c.round = round;
      c.clock.reset();
      StepExecutor(engine).run(c, steps, y, scratch, cs.op);
      const std::vector<std::byte> expected = reference_result(cs.op, cs.shape.ranks, n);
      if (n > 0 && std::memcmp(y, expected.data(), expected.size()) != 0) {
        std::uint64_t e = 0;
        while (std::memcmp(y + e * cs.op.element_bytes, expected.data() + e * cs.op.element_bytes,
                           cs.op.element_bytes) == 0)
          ++e;
        put_message(message, "round " + std::to_string(round) + ": wrong result at element " + std::to_string(e));
        _exit(1);
      }
    }
    root->finish[rank] = c.clock.now();
    root->attached[rank] = engine.attached_bytes();
    status = 0;
  } catch (const LinkAborted&) {
    if (message) put_message(message, "aborted by another rank's failure");
    status = 2;
  } catch (const std::exception& e) {
    if (message) put_message(message, e.what());
    status = 1;
  } catch (...) {
    status = 4;
  }
  _exit(status);
}

struct ArenaOutcome {
  std::vector<int> status;  // exit status per rank; -signal if killed by a signal
  std::vector<std::string> message;
  std::vector<Picos> finish;
  std::uint64_t attached = 0;  // bytes read by cross-memory attach, all ranks
};

// Runs `cs` with one process per rank; fails the test if any child outlives
// `deadline` (then kills them all).
ArenaOutcome run_processes(const ArenaCase& cs, std::chrono::seconds deadline) {
  const int k = cs.shape.ranks;
  REQUIRE(k <= kMaxRanks);
  const std::uint64_t n = cs.shape.count;
  const std::size_t eb = cs.op.element_bytes;
  SegmentGuard guard{unique_segment_name()};
  ShmArena::remove(guard.name);  // a leftover of a crashed earlier run with this pid

  // Size the segment: link state, then each rank's buffer and staging scratch.
  std::vector<std::uint64_t> scratch(static_cast<std::size_t>(k));
  const SchedulePlan plan = cs.algorithm->plan(cs.shape);
  for (int r = 0; r < k; ++r) {
    std::vector<Step> steps;
    scratch[static_cast<std::size_t>(r)] = compile_steps(plan, r, k, n, steps);
  }
  std::size_t bytes = sizeof(Root) + 4096 + static_cast<std::size_t>(k) * 1024;
  for (int r = 0; r < k; ++r) bytes += (n + scratch[static_cast<std::size_t>(r)]) * eb + cs.stage_bytes + 256;
  ShmArena arena(ShmArena::Create{}, guard.name, bytes);
  const Arena::Offset root_at = arena.allocate(sizeof(Root), 64);
  Root* root = new (arena.address(root_at)) Root{};
  root->link = LinkEngine::create_shared(arena, k);
  for (int r = 0; r < k; ++r) {
    root->buffer[r] = arena.allocate(n * eb, 64);
    root->scratch[r] = arena.allocate(scratch[static_cast<std::size_t>(r)] * eb, 64);
    if (cs.stage_bytes > 0) root->stage[r] = arena.allocate(cs.stage_bytes, 64);
  }
  arena.set_root(root_at);

  std::vector<pid_t> pids;
  for (int r = 0; r < k; ++r) {
    const pid_t pid = fork();
    if (pid == 0) child_main(guard.name, cs, r);
    if (pid < 0) {
      for (pid_t p : pids) kill(p, SIGKILL);
      for (pid_t p : pids) waitpid(p, nullptr, 0);
      FAIL("fork failed: " << std::strerror(errno));
    }
    pids.push_back(pid);
  }

  ArenaOutcome out;
  out.status.assign(static_cast<std::size_t>(k), 0);
  out.attached = 0;
  std::vector<bool> reaped(static_cast<std::size_t>(k), false);
  const auto until = std::chrono::steady_clock::now() + deadline;
  int left = k;
  while (left > 0) {
    for (int r = 0; r < k; ++r) {
      if (reaped[static_cast<std::size_t>(r)]) continue;
      int status = 0;
      const pid_t got = waitpid(pids[static_cast<std::size_t>(r)], &status, WNOHANG);
      if (got == 0) continue;
      reaped[static_cast<std::size_t>(r)] = true;
      root->reaped[r].store(1);
      --left;
      out.status[static_cast<std::size_t>(r)] = got < 0             ? -1000
                                                : WIFEXITED(status) ? WEXITSTATUS(status)
                                                                    : -WTERMSIG(status);
    }
    if (left > 0 && std::chrono::steady_clock::now() > until) {
      std::string hung;
      for (int r = 0; r < k; ++r)
        if (!reaped[static_cast<std::size_t>(r)]) {
          hung += " " + std::to_string(r);
          kill(pids[static_cast<std::size_t>(r)], SIGKILL);
          waitpid(pids[static_cast<std::size_t>(r)], nullptr, 0);
        }
      FAIL("rank process(es)" << hung << " still running after " << deadline.count() << " s: killed");
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < k; ++r) {
    out.message.emplace_back(root->message[r]);
    out.finish.push_back(root->finish[r]);
    out.attached += root->attached[r];
  }
  return out;
}

ExecutorConfig run_config(int k, Ports ports) {
  // Pairs of processes stand for nodes (both link levels are used), all on
  // one node's segment: RankMap places them in one process, so every pair
  // shares memory and talks through the arena.
  return executor_config(RankMap::uniform(k, 2),
                         CostModel({LinkCost{2e-7, 5e-11}, LinkCost{1.5e-6, 1e-10}}, 2.5e-11, ports),
                         wait_settings(std::chrono::milliseconds(20000), "repetition"));
}

}  // namespace

TEST_CASE("concurrency: processes over a shared-memory arena run registry allreduces through the link engine",
          "[arena][processes]") {
  const std::pair<const char*, const char*> runs[] = {
      {"rabenseifner", "affine"}, {"rabenseifner", "sum"}, {"dual-root", "affine"}, {"dual-root", "sum"}};
  for (const auto& [name, op_name] : runs)
    for (int k : {2, 3, 4})
      for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{7}, std::uint64_t{100003}})
        for (Ports ports : {Ports::bidirectional, Ports::unidirectional}) {
          ArenaCase cs;
          cs.algorithm = &find_algorithm(Collective::allreduce, name);
          cs.op = builtin_op(op_name, std::string(op_name) == "sum" ? DType::float64 : DType::uint32);
          cs.shape = Shape{k, n, 4, 0};
          cs.run = run_config(k, ports);
          INFO(name << " " << op_name << ", " << k << " processes, " << n << " elements, "
                    << (ports == Ports::bidirectional ? "bidirectional" : "unidirectional"));
          const ArenaOutcome out = run_processes(cs, std::chrono::seconds(60));
          for (int r = 0; r < k; ++r) {
            INFO("rank " << r << ": " << out.message[static_cast<std::size_t>(r)]);
            CHECK(out.status[static_cast<std::size_t>(r)] == 0);
          }
          // The virtual clock crosses processes too: the simulator's times.
          SimulationOptions sim;
          sim.model = cs.run.model;
          sim.layout = cs.run.layout;
          sim.element_bytes = cs.op.element_bytes;
          const SimulationResult expected = simulate(cs.algorithm->plan(cs.shape), k, sim);
          CHECK(out.finish == expected.finish);
        }
}

TEST_CASE("concurrency: processes: a rank that never takes part makes its peers time out naming it",
          "[arena][processes]") {
  // Two processes: rank 0 waits on the absent rank 1 directly. Three: whoever
  // times out first names the peer it waits for (rank 2, or rank 1 stuck on
  // rank 2), and the abort crosses processes so that nobody is left hanging.
  for (int k : {2, 3}) {
    ArenaCase cs;
    cs.algorithm = &find_algorithm(Collective::allreduce, "dual-root");
    cs.op = builtin_op("sum", DType::int32);
    cs.shape = Shape{k, 1000, 2, 0};
    cs.run = run_config(k, Ports::bidirectional);
    cs.run.waits.timeout = std::chrono::milliseconds(300);
    cs.absent_rank = k - 1;
    const auto t0 = std::chrono::steady_clock::now();
    const ArenaOutcome out = run_processes(cs, std::chrono::seconds(30));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    CHECK(out.status[static_cast<std::size_t>(k - 1)] == 0);
    int timed_out = 0;
    for (int r = 0; r < k - 1; ++r) {
      const std::string& m = out.message[static_cast<std::size_t>(r)];
      INFO("rank " << r << " exited with " << out.status[static_cast<std::size_t>(r)] << ": " << m);
      CHECK((out.status[static_cast<std::size_t>(r)] == 1 || out.status[static_cast<std::size_t>(r)] == 2));
      if (out.status[static_cast<std::size_t>(r)] == 1) {
        ++timed_out;
        CHECK_THAT(m, Catch::Contains("rank " + std::to_string(r)) && Catch::Contains("step ") &&
                          Catch::Contains("timed out after 300 ms waiting for rank "));
      }
    }
    CHECK(timed_out >= 1);
    if (k == 2)
      CHECK_THAT(out.message[0], Catch::Contains("waiting for rank 1") && Catch::Contains("rank 1 has not started"));
  }
}

namespace {

// The MPI layer's link between processes: staged sends, no virtual clock;
// cross-memory attach for sends of `from` bytes and more.
LinkConfig staged_config(bool attach, std::size_t from) {
  LinkConfig link;
  link.staged_sends = true;
  link.cross_memory_attach = attach;
  link.attach_from_bytes = from;
  return link;
}

// The bytes `cs`'s receivers must read by cross-memory attach in one run:
// every send beyond the outbox's inline eager copy (16 bytes) of at least
// attach_from_bytes, or too large for the stage.
std::uint64_t attached_per_run(const ArenaCase& cs) {
  if (!cs.link.cross_memory_attach) return 0;
  std::uint64_t total = 0;
  for (int r = 0; r < cs.shape.ranks; ++r) {
    std::vector<Step> steps;
    compile_steps(cs.algorithm->plan(cs.shape), r, cs.shape.ranks, cs.shape.count, steps);
    for (const Step& st : steps) {
      const std::uint64_t bytes = st.send ? st.send.count * cs.op.element_bytes : 0;
      if (bytes > 16 && (bytes >= cs.link.attach_from_bytes || bytes > cs.stage_bytes)) total += bytes;
    }
  }
  return total;
}

}  // namespace

TEST_CASE("concurrency: processes with staged sends read large messages by cross-memory attach",
          "[arena][processes][cma]") {
  // Elements of 8 bytes, attach from 4 KiB (512 elements): with 2 ranks
  // Rabenseifner's halves of 1023, 1024 and 1025 elements lie below, at and
  // above it; `affine` (non-commutative) combines on both sides, and the
  // allgather half replaces. The second configuration attaches only what
  // outgrows the 8 KiB stage; the third is the fallback, every send staged.
  struct Mode {
    const char* what;
    bool attach;
    std::size_t from;
  };
  const Mode modes[] = {{"attach from 4 KiB", true, 4096},
                        {"attach beyond the stage", true, std::size_t{1} << 20},
                        {"stage only", false, 4096}};
  const std::pair<const char*, const char*> runs[] = {
      {"rabenseifner", "affine"}, {"dual-root", "affine"}, {"rabenseifner", "sum"}};
  std::uint64_t attached = 0;
  for (const Mode& mode : modes)
    for (const auto& [name, op_name] : runs)
      for (int k : {2, 3, 4})
        for (std::uint64_t n : {1, 7, 1023, 1024, 1025, 100003}) {
          ArenaCase cs;
          cs.algorithm = &find_algorithm(Collective::allreduce, name);
          cs.op = builtin_op(op_name, std::string(op_name) == "sum" ? DType::float64 : DType::uint32);
          cs.shape = Shape{k, n, 4, 0};
          cs.run = run_config(k, Ports::bidirectional);
          cs.run.virtual_clock = false;
          cs.link = staged_config(mode.attach, mode.from);
          // The fallback stages every send: its stage holds the whole vector.
          cs.stage_bytes = mode.attach ? 8192 : std::max<std::size_t>(8192, n * cs.op.element_bytes);
          INFO(mode.what << ": " << name << " " << op_name << ", " << k << " processes, " << n << " elements");
          const ArenaOutcome out = run_processes(cs, std::chrono::seconds(60));
          for (int r = 0; r < k; ++r) {
            INFO("rank " << r << ": " << out.message[static_cast<std::size_t>(r)]);
            CHECK(out.status[static_cast<std::size_t>(r)] == 0);
          }
          // Three rounds, every large message read from the sender's
          // process, none silently staged instead.
          CHECK(out.attached == 3 * attached_per_run(cs));
          attached += out.attached;
        }
  CHECK(attached > 0);
}

namespace {

// Two processes exchanging halves of 100000 int32 (200 KB each, attached)
// in Rabenseifner's first step, with a wait timeout of `timeout`.
ArenaCase attached_exchange(std::chrono::milliseconds timeout) {
  ArenaCase cs;
  cs.algorithm = &find_algorithm(Collective::allreduce, "rabenseifner");
  cs.op = builtin_op("sum", DType::int32);
  cs.shape = Shape{2, 100000, 1, 0};
  cs.run = run_config(2, Ports::bidirectional);
  cs.run.virtual_clock = false;
  cs.run.waits.timeout = timeout;
  cs.link = staged_config(true, 4096);
  cs.stage_bytes = 8192;
  return cs;
}

}  // namespace

TEST_CASE("concurrency: processes: an attached send whose receiver never comes times out, not hangs",
          "[arena][processes][cma]") {
  ArenaCase cs = attached_exchange(std::chrono::milliseconds(300));
  cs.absent_rank = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const ArenaOutcome out = run_processes(cs, std::chrono::seconds(30));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  INFO("rank 0: " << out.message[0]);
  CHECK(out.status[0] == 1);
  CHECK_THAT(out.message[0], Catch::Contains("timed out after 300 ms waiting for rank 1"));
}

TEST_CASE("concurrency: processes: reading an attached send of a process that is gone fails naming both ranks",
          "[arena][processes][cma]") {
  // Rank 0 posts its first send (200 KB, attached) and exits; rank 1 reads
  // it once rank 0's process has been reaped: process_vm_readv fails (ESRCH),
  // and rank 1 fails with a SystemError instead of waiting.
  ArenaCase cs = attached_exchange(std::chrono::milliseconds(5000));
  cs.sender_dies = true;
  const auto t0 = std::chrono::steady_clock::now();
  const ArenaOutcome out = run_processes(cs, std::chrono::seconds(30));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));
  CHECK(out.status[0] == 0);
  INFO("rank 1: " << out.message[1]);
  CHECK(out.status[1] == 1);
  CHECK_THAT(out.message[1], Catch::Contains("rank 1") && Catch::Contains("cannot read the 200000-byte message of") &&
                                 Catch::Contains("rank 0") && Catch::Contains("process_vm_readv") &&
                                 Catch::Contains(std::strerror(ESRCH)));
}

TEST_CASE("shared-memory arena: offsets, alignment, bounds and removal", "[arena]") {
  SegmentGuard guard{unique_segment_name()};
  ShmArena a(ShmArena::Create{}, guard.name, 1 << 16);
  const Arena::Offset x = a.allocate(10, 64);
  const Arena::Offset y = a.allocate(100, 4096);
  CHECK(x % 64 == 0);
  CHECK(y % 4096 == 0);
  CHECK(y >= x + 10);
  CHECK(a.contains(a.address(y), 100));
  CHECK_FALSE(a.contains(a.address(a.size()), 1));
  int local = 0;
  CHECK_FALSE(a.contains(&local, sizeof(local)));
  CHECK_THROWS_AS(a.allocate(std::size_t{1} << 20, 64), std::bad_alloc);
  CHECK_THROWS_AS(a.allocate(8, 3), UsageError);
  a.set_root(y);
  std::memcpy(a.address(y), "copse", 6);
  {
    // A second mapping of the same segment sees the same bytes at the same offsets.
    ShmArena b(ShmArena::Open{}, guard.name);
    CHECK(b.root() == y);
    CHECK(std::string(reinterpret_cast<const char*>(b.address(b.root()))) == "copse");
    CHECK(b.allocate(8, 8) >= y + 100);  // one cursor, shared
  }
  CHECK_THROWS_WITH(ShmArena(ShmArena::Create{}, guard.name, 4096), Catch::Contains(guard.name));
  CHECK(ShmArena::remove(guard.name));
  CHECK_FALSE(ShmArena::remove(guard.name));
  CHECK_THROWS_WITH(ShmArena(ShmArena::Open{}, guard.name), Catch::Contains(guard.name));

  HeapArena h;
  const Arena::Offset s = h.allocate(24, 128);
  CHECK(s % 128 == 0);
  CHECK(h.address(s) == reinterpret_cast<std::byte*>(s));  // base 0: offsets are this process's addresses
  CHECK(h.offset_of(&local) == reinterpret_cast<std::uintptr_t>(&local));
  const Arena::Offset big = h.allocate(std::size_t{3} << 20, 4096);
  CHECK(big % 4096 == 0);
  h.address(big)[(std::size_t{3} << 20) - 1] = std::byte{1};  // mapped and writable
  CHECK(h.mapped_bytes() >= (std::size_t{3} << 20));
}
