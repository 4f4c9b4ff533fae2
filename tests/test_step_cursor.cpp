// A StepCursor (algorithms/step_cursor.hpp) is the simulator's fast path for
// the schedule its plan's coroutines yield: it must yield exactly their
// steps, in order, for every rank, p, count and block count.
#include <bit>
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/patterns.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/step_cursor.hpp"

using namespace copse;

namespace step_cursor_test {

std::string describe(const Step& s) {
  std::ostringstream o;
  o << "send " << s.send.peer << ":" << s.send.offset << "+" << s.send.count << " recv " << s.recv.peer << ":"
    << s.recv.offset << "+" << s.recv.count << " combine " << static_cast<int>(s.combine) << " copy " << s.copy.from
    << "->" << s.copy.to << "+" << s.copy.count;
  return o.str();
}

bool same_step(const Step& a, const Step& b) {
  const auto same = [](const Transfer& x, const Transfer& y) {
    return x.peer == y.peer && x.offset == y.offset && x.count == y.count;
  };
  return same(a.send, b.send) && same(a.recv, b.recv) && a.combine == b.combine && a.copy.from == b.copy.from &&
         a.copy.to == b.copy.to && a.copy.count == b.copy.count;
}

bool same_move(const StepMove& a, const StepMove& b) {
  return a.send_peer == b.send_peer && a.recv_peer == b.recv_peer && a.send_count == b.send_count &&
         a.recv_count == b.recv_count && a.work_elements == b.work_elements;
}

// Every rank's steps from the cursor, against its coroutine's; seek_move
// (what the simulator calls) stops where seek does, with the step's move.
void check_cursor_matches(const char* algorithm, const Shape& shape) {
  const SchedulePlan plan = find_algorithm(Collective::allreduce, algorithm).plan(shape);
  const StepCursor* cursor = cursor_of(plan);
  REQUIRE(cursor != nullptr);
  for (int rank = 0; rank < shape.ranks; ++rank) {
    RankSchedule coroutine = plan(rank);
    std::uint32_t position = 0, move_position = 0;
    Step found;
    StepMove move;
    for (int step = 0; coroutine.next(); ++position, ++move_position, ++step)
      if (!cursor->seek(rank, position, found) || !same_step(found, coroutine.value()) ||
          !same_step(cursor->at(rank, position), found) || !cursor->seek_move(rank, move_position, move) ||
          move_position != position || !same_move(move, move_of(found)))
        FAIL(algorithm << ", p = " << shape.ranks << ", count " << shape.count << ", blocks " << shape.blocks
                       << ", rank " << rank << ", step " << step << ": the cursor gives " << describe(found)
                       << ", the coroutine " << describe(coroutine.value()));
    if (cursor->seek(rank, position, found) || cursor->seek_move(rank, move_position, move))
      FAIL(algorithm << ", p = " << shape.ranks << ", rank " << rank << ": the cursor goes on with "
                     << describe(found));
  }
}

}  // namespace step_cursor_test

using namespace step_cursor_test;

// Every algorithm whose allreduce plan carries a cursor.
constexpr const char* kCursorAlgorithms[] = {"dual-root", "binomial", "two-tree", "rabenseifner", "recursive-doubling"};

TEST_CASE("step cursors yield their coroutines' steps", "[exhaustive]") {
  std::vector<int> sizes{4097};  // deeper than 16 blocks: rounds in which some slots are void
  for (int p = 1; p <= 70; ++p) sizes.push_back(p);
  for (const char* algorithm : kCursorAlgorithms)
    for (int p : sizes)
      for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{5}, std::uint64_t{1000}})
        for (int blocks : {1, 2, 3, 16}) {
          Shape shape;
          shape.ranks = p;
          shape.count = count;
          shape.blocks = blocks;
          check_cursor_matches(algorithm, shape);
        }
  Shape deep;  // a larger vector
  deep.ranks = 4097;
  deep.count = 1 << 20;
  deep.blocks = 4;
  for (const char* algorithm : kCursorAlgorithms) check_cursor_matches(algorithm, deep);
}

// Rabenseifner's cursor computes a rank's region before any halving in
// closed form (patterns.cpp, region_before); the schedules' shares must be
// those of halving the vector level by level, the lower half (floor) to the
// rank whose bit is clear, as the butterfly does.
TEST_CASE("the halving shares are those of halving level by level") {
  for (int p = 1; p <= 70; ++p)
    for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3},
                                std::uint64_t{7}, std::uint64_t{64}, std::uint64_t{1000}, std::uint64_t{131071}}) {
      const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p))), extra = p - p2;
      for (int rank = 0; rank < p; ++rank) {
        patterns::Share expected;
        if (rank >= 2 * extra || rank % 2 == 1) {  // not folded away: butterfly rank n
          const int n = rank < 2 * extra ? rank / 2 : rank - extra;
          expected = {0, count};
          for (int bit = 1; bit < p2; bit <<= 1) {
            const std::uint64_t mid = expected.lo + (expected.hi - expected.lo) / 2;
            expected = (n & bit) ? patterns::Share{mid, expected.hi} : patterns::Share{expected.lo, mid};
          }
        }
        const patterns::Share share = patterns::halving_share(rank, p, count);
        INFO("p = " << p << ", count " << count << ", rank " << rank);
        CHECK(share.lo == expected.lo);
        CHECK(share.hi == expected.hi);
      }
    }
}
