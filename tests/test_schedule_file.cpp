// Schedule files (algorithms/schedule_file.hpp): Bjørndalen et al.'s 8W
// configurations load, are proven and run on the emulator with the right
// result; a tree file is step for step the built-in algorithm of the same
// tree; bad files fail with one UsageError naming FILE:LINE; the thread Comm
// runs a file named in its options; and no mutation of a good file crashes
// the parser or the verifier.

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/registry.hpp"
#include "algorithms/schedule_file.hpp"
#include "algorithms/simulator.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"
#include "common/reduce_op.hpp"
#include "runtime/comm.hpp"
#include "tests/support.hpp"
#include "tools/experiment.hpp"

using namespace copse;

namespace {

const std::string kExamples = std::string(COPSE_SOURCE_DIR) + "/examples/schedules/";
const std::vector<std::string> k8W = {"8w-default.txt", "8w-local-root.txt", "8w-groups-of-four.txt",
                                      "8w-groups-of-two.txt"};

// A scratch file holding `text`; each call gets a new path (entries are per
// path and text). The directory goes when the test program ends.
std::string scratch_file(const std::string& text) {
  static const testing::TempDir dir;
  static int serial = 0;
  return dir.write("f" + std::to_string(++serial) + ".txt", text);
}

// The message of the UsageError loading `text` as `collective` throws ("" if none).
std::string load_error(const std::string& text, Collective collective = Collective::allreduce) {
  const std::string path = scratch_file(text);
  try {
    (void)find_algorithm(collective, "file:" + path);
  } catch (const UsageError& e) {
    const std::string m = e.what();
    REQUIRE(m.rfind(path + ":", 0) == 0);  // every message starts with the file's name
    return m.substr(path.size());
  }
  return "";
}

std::vector<std::vector<Step>> steps_of(const SchedulePlan& plan, int p) {
  std::vector<std::vector<Step>> out(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    for (auto g = plan(r); g.next();) out[static_cast<std::size_t>(r)].push_back(g.value());
  return out;
}

bool same_steps(const std::vector<std::vector<Step>>& a, const std::vector<std::vector<Step>>& b) {
  auto same = [](const Step& x, const Step& y) {
    auto t = [](const Transfer& s, const Transfer& d) {
      return s.peer == d.peer && s.offset == d.offset && s.count == d.count;
    };
    return t(x.send, y.send) && t(x.recv, y.recv) && (!x.recv || x.combine == y.combine) &&
           x.copy.count == y.copy.count;
  };
  if (a.size() != b.size()) return false;
  for (std::size_t r = 0; r < a.size(); ++r)
    if (!std::equal(a[r].begin(), a[r].end(), b[r].begin(), b[r].end(), same)) return false;
  return true;
}

}  // namespace

TEST_CASE("schedule files: the 8W configurations load and are proven for every collective a tree serves") {
  for (const auto& name : k8W)
    for (Collective c : {Collective::allreduce, Collective::reduce, Collective::bcast, Collective::barrier}) {
      INFO(name << " " << to_string(c));
      const AlgorithmInfo& a = find_algorithm(c, "file:" + kExamples + name);
      CHECK(a.collective == c);
      CHECK_FALSE(a.needs_commutative);  // every 8W tree keeps rank order
      CHECK(a.pipelined);
      for (int blocks : {1, 3, 8})
        for (int root : {0, 13}) {
          if (root && c != Collective::reduce && c != Collective::bcast) continue;
          const Shape shape{32, 100, blocks, root};
          const auto r = verify(a, shape);
          INFO("blocks " << blocks << " root " << root << ": " << r.message);
          CHECK(r.proven);
        }
    }
}

TEST_CASE("schedule files: the 8W configurations run on a 4 x 8 emulated cluster with correct results") {
  ClusterSpec spec;
  spec.ranks_per_node = {8, 8, 8, 8};
  const EmulatedCluster cluster(spec);
  std::vector<Picos> times;
  for (const auto& name : k8W)
    for (const char* op_name : {"sum", "affine"}) {
      const ReduceOp op = builtin_op(op_name, std::string(op_name) == "affine" ? DType::int16 : DType::int32);
      const auto& a = find_algorithm(Collective::allreduce, "file:" + kExamples + name);
      const auto run = run_checked_emulation(cluster, a, op, 1000, 0, 4);
      INFO(name << " " << op_name << ": " << run.failure);
      CHECK(run.ok);
      CHECK(run.emulation.verified);
      CHECK(run.matches_simulator);
      if (std::string(op_name) == "sum") times.push_back(run.emulation.virtual_time);
    }
  for (const auto& name : {std::string("8w-groups-of-four.txt")})
    for (Collective c : {Collective::reduce, Collective::bcast}) {
      const auto run = run_checked_emulation(cluster, find_algorithm(c, "file:" + kExamples + name),
                                             builtin_op("sum", DType::int32), 777, 5, std::nullopt);
      INFO(name << " " << to_string(c) << ": " << run.failure);
      CHECK(run.ok);
    }
  REQUIRE(times.size() == 4);
  CHECK(std::adjacent_find(times.begin(), times.end()) == times.end());  // four different trees, four times
}

TEST_CASE("schedule files: a tree file is step for step the built-in algorithm over the same tree") {
  std::string flat = "ranks 9\ntree\n0:";
  for (int r = 1; r < 9; ++r) flat += " " + std::to_string(r);
  // (file, the built-in algorithm over the same tree, the file's rank count)
  const std::vector<std::tuple<std::string, std::string, int>> cases = {{kExamples + "8w-default.txt", "binomial", 32},
                                                                        {scratch_file(flat + "\n"), "flat", 9}};
  for (const auto& [path, builtin, p] : cases)
    for (Collective c : {Collective::allreduce, Collective::reduce, Collective::bcast})
      for (int blocks : {1, 2, 5}) {
        const auto& file = find_algorithm(c, "file:" + path);
        const auto& mine = find_algorithm(c, builtin);
        const Shape shape{p, 1001, blocks, 0};
        INFO(path << " " << to_string(c) << " blocks " << blocks);
        CHECK(same_steps(steps_of(file.plan(shape), p), steps_of(mine.plan(shape), p)));
      }
}

TEST_CASE("schedule files: step lists, combine sides and commutativity") {
  const auto& rd = find_algorithm(Collective::allreduce, "file:" + kExamples + "recursive-doubling-4.txt");
  CHECK_FALSE(rd.needs_commutative);
  CHECK_FALSE(rd.pipelined);
  CHECK(verify(rd, Shape{4, 37, 1, 0}).proven);
  CHECK(same_steps(steps_of(rd.plan(Shape{4, 37, 1, 0}), 4),
                   steps_of(find_algorithm(Collective::allreduce, "recursive-doubling").plan(Shape{4, 37, 1, 0}), 4)));

  // A tree that takes its children out of rank order serves commutative operators only.
  const auto& shuffled = find_algorithm(Collective::allreduce, "file:" + scratch_file("ranks 3\ntree\n0: 2 1\n"));
  CHECK(shuffled.needs_commutative);
  CHECK_THROWS_AS(check_operator(shuffled, "affine", false), UsageError);

  // A pipelined two-block chain reduce written out, explicit sides.
  const std::string chain =
      "ranks 3\ncollective reduce\nblocks 2\nroot 2\nsteps\n"
      "0: send 1 block 0\n0: send 1 block 1\n"
      "1: recv 0 block 0 left\n1: recv 0 block 1 left, send 2 block 0\n1: send 2 block 1\n"
      "2: recv 1 block 0 left\n2: recv 1 block 1 left\n";
  const auto& reduce = find_algorithm(Collective::reduce, "file:" + scratch_file(chain));
  CHECK_FALSE(reduce.needs_commutative);
  for (std::uint64_t count : {0, 1, 2, 3, 1000}) CHECK(verify(reduce, Shape{3, count, 1, 2}).proven);
  ClusterSpec spec;
  spec.ranks_per_node = {1, 1, 1};
  const auto run =
      run_checked_emulation(EmulatedCluster(spec), reduce, builtin_op("affine", DType::int16), 501, 2, std::nullopt);
  INFO(run.failure);
  CHECK(run.ok);
}

TEST_CASE("schedule files: every bad file is one UsageError naming FILE:LINE") {
  using Catch::Matchers::Contains;
  using Catch::Matchers::StartsWith;
  const std::string t4 = "ranks 4\ntree\n";
  CHECK_THAT(load_error(t4 + "0: 1\n2: 3\n3: 2\n"), StartsWith(":5: cycle: 2 -> 3 -> 2"));
  CHECK_THAT(load_error(t4 + "0: 1 2\n2: 3\n3: 2\n"), StartsWith(":5: rank 2 already sends to rank 0 (line 3)"));
  CHECK_THAT(load_error(t4 + "0: 1\n1: 2\n2: 1 3\n"), StartsWith(":5: rank 1 already sends to rank 0"));
  CHECK_THAT(load_error(t4 + "0: 1 2\n"), StartsWith(":1: rank 3 is missing"));
  CHECK_THAT(load_error(t4 + "0: 1 2 1 3\n"), StartsWith(":3: rank 0 receives from rank 1 twice"));
  CHECK_THAT(load_error(t4 + "0: 1 2 4\n"), StartsWith(":3: a child rank '4' is out of range [0, 3]"));
  CHECK_THAT(load_error(t4 + "0: 1 two 3\n"), StartsWith(":3: expected a child rank (a number), got 'two'"));
  CHECK_THAT(load_error("ranks 4\ntre\n"), StartsWith(":2: unknown keyword 'tre'"));
  CHECK_THAT(load_error("ranks 4\n"), StartsWith(":2: no 'tree' or 'steps' line"));
  CHECK_THAT(load_error(""), StartsWith(":1: no 'tree' or 'steps' line"));
  CHECK_THAT(load_error("tree\n0: 1\n"), StartsWith(":1: no 'ranks N' line"));
  CHECK_THAT(load_error(t4 + "0: 1\n2: 3\n"), StartsWith(":1: the tree has 2 roots (ranks 0, 2)"));
  CHECK_THAT(load_error(t4 + "0: 0 1 2 3\n"), StartsWith(":3: rank 0 lists itself"));
  CHECK_THAT(load_error("ranks 2\nranks 3\ntree\n"), StartsWith(":2: 'ranks' given twice"));
  CHECK_THAT(load_error(t4 + "0: 1 2 3\n", Collective::allgather), StartsWith(":2: the file serves allreduce"));

  // Step lists: the verifier's findings traced back to a line.
  const std::string s2 = "ranks 2\ncollective allreduce\nsteps\n";
  CHECK_THAT(load_error(s2 + "0: send 1, recv 1 combine\n1: send 0, recv 0 combine\n0: recv 1 combine\n"),
             StartsWith(":6: the schedule is wrong: deadlock"));
  CHECK_THAT(load_error(s2 + "0: send 1, recv 1 combine\n1: send 0, recv 0 combine\n"
                             "0: recv 1 combine\n1: send 0\n"),  // receives x_1 twice
             StartsWith(":6: the schedule is wrong: rank 0 step 1 combines"));
  CHECK_THAT(load_error(s2 + "0: send 1\n1: recv 0\n"), StartsWith(":4: the schedule is wrong: rank 0 ends holding"));
  CHECK_THAT(load_error(s2 + "0: send 1, recv 1 combine\n"), StartsWith(":1: rank 1 has no line"));
  CHECK_THAT(load_error(s2 + "0: send 0\n1:\n"), StartsWith(":4: rank 0 sends to itself"));
  CHECK_THAT(load_error(s2 + "0: send 1, send 1\n1:\n"), StartsWith(":4: two sends in one step"));
  CHECK_THAT(load_error(s2 + "0: send 1 block 1\n1:\n"), StartsWith(":4: a block '1' is out of range [0, 0]"));
  CHECK_THAT(load_error(s2 + "0: recv 1 sideways\n1:\n"), StartsWith(":4: unknown receive mode 'sideways'"));
  CHECK_THAT(load_error(s2 + "0: jump 1\n1:\n"), StartsWith(":4: unknown operation 'jump'"));
  CHECK_THAT(load_error("ranks 2\nsteps\n0:\n1:\n"), StartsWith(":2: a step list needs a 'collective' line"));
  CHECK_THAT(load_error("ranks 2\ncollective allreduce\nblocks 2\ntree\n"), StartsWith(":3: 'blocks' is for step"));
  CHECK_THAT(load_error("ranks 99999999999999999999\n"), Contains("out of range"));

  // A good file run on the wrong rank count: the `ranks` line is to blame.
  const auto& a = find_algorithm(Collective::allreduce, "file:" + kExamples + "8w-groups-of-four.txt");
  try {
    (void)a.plan(Shape{16, 10, 1, 0});
    FAIL("no error for 16 ranks");
  } catch (const UsageError& e) {
    CHECK_THAT(e.what(), Contains("8w-groups-of-four.txt:6: the schedule is written for 32 ranks"));
  }
  CHECK_THROWS_WITH(find_algorithm(Collective::allreduce, "file:/nonexistent/x.txt"),
                    "/nonexistent/x.txt: cannot open the schedule file");
}

TEST_CASE("schedule files: the thread Comm runs a file named in its options") {
  // One rank per node: the inter-node algorithm runs over all four ranks.
  // (The Comm composes its other collectives from built-in trees only.)
  TeamOptions o;
  for (int i = 0; i < 4; ++i) o.nodes.push_back(NodeSpec{Machine::synthetic("core:1 pu:1"), 1, {}});
  o.allreduce = "file:" + kExamples + "recursive-doubling-4.txt";
  o.barrier = o.allreduce;  // a one-element allreduce
  o.wait_timeout = std::chrono::milliseconds(30000);
  Team team(o);
  const ReduceOp sum = builtin_op("sum", DType::int32);
  constexpr std::size_t n = 1000;
  std::vector<std::vector<std::int32_t>> got(4), again(4);
  std::vector<std::exception_ptr> errors(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      try {
        Comm& c = team.comm(r);
        std::vector<std::int32_t> in(n);
        for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::int32_t>(i * (r + 1));
        got[static_cast<std::size_t>(r)].resize(n);
        c.allreduce(in.data(), got[static_cast<std::size_t>(r)].data(), n, sum);
        c.barrier();
        c.allreduce(in.data(), in.data(), n, sum);  // in place, the cached plan
        again[static_cast<std::size_t>(r)] = in;
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << testing::message_of(errors[static_cast<std::size_t>(r)]));
    REQUIRE_FALSE(errors[static_cast<std::size_t>(r)]);
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(got[static_cast<std::size_t>(r)][i] == static_cast<std::int32_t>(i * 10));
      REQUIRE(again[static_cast<std::size_t>(r)][i] == static_cast<std::int32_t>(i * 10));
    }
  }
}

TEST_CASE("schedule files: mutated files never crash the parser or the verifier") {
  std::vector<std::string> seeds;
  for (const auto& name : k8W) {
    std::ifstream in(kExamples + name);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  seeds.push_back("ranks 3\ncollective reduce\nblocks 2\nroot 2\nsteps\n0: send 1 blocks 0-1\n1: recv 0 all left\n");
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789 :,-#\n\tabcdefghijklmnopqrstuvwxyz\x01\xff";
  int parsed = 0, refused = 0, proven = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    for (int k = 1 + static_cast<int>(rng() % 4); k > 0 && !text.empty(); --k) {
      const std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(at, 1 + rng() % 8); break;
        default: text.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    try {
      auto f = std::make_shared<const ScheduleFile>(parse_schedule_file(text, "mutant"));
      ++parsed;
      // Whatever parses, the verifier judges without crashing or hanging
      // (a deadlock is a finding, not a wait).
      for (Collective c : f->collectives) {
        const bool tree = f->form == ScheduleFile::Form::tree;
        const AlgorithmInfo info{c, "mutant", "", true, tree, nullptr};
        const Shape shape{f->ranks, tree ? 7u : 2u * static_cast<unsigned>(f->blocks) + 1, 2,
                          tree ? f->root : f->steps_root};
        proven += verify(info, schedule_file_plan(f, c, shape), shape).proven ? 1 : 0;
      }
    } catch (const UsageError& e) {
      ++refused;
      CHECK(std::string(e.what()).rfind("mutant", 0) == 0);
    }
  }
  CHECK(parsed > 0);
  CHECK(refused > 0);
  CHECK(proven > 0);
}
