// A StepCursor (algorithms/step_cursor.hpp) is the simulator's fast path for
// the schedule its plan's coroutines yield: it must yield exactly their
// steps, in order, for every rank, p, count and block count.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

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

// Every rank's steps from the cursor, against its coroutine's.
void check_cursor_matches(const char* algorithm, const Shape& shape) {
  const SchedulePlan plan = find_algorithm(Collective::allreduce, algorithm).plan(shape);
  const StepCursor* cursor = cursor_of(plan);
  REQUIRE(cursor != nullptr);
  for (int rank = 0; rank < shape.ranks; ++rank) {
    RankSchedule coroutine = plan(rank);
    std::uint32_t position = 0;
    Step found;
    for (int step = 0; coroutine.next(); ++position, ++step)
      if (!cursor->seek(rank, position, found) || !same_step(found, coroutine.value()) ||
          !same_step(cursor->at(rank, position), found))
        FAIL(algorithm << ", p = " << shape.ranks << ", count " << shape.count << ", blocks " << shape.blocks
                       << ", rank " << rank << ", step " << step << ": the cursor gives " << describe(found)
                       << ", the coroutine " << describe(coroutine.value()));
    if (cursor->seek(rank, position, found))
      FAIL(algorithm << ", p = " << shape.ranks << ", rank " << rank << ": the cursor goes on with "
                     << describe(found));
  }
}

}  // namespace step_cursor_test

using namespace step_cursor_test;

TEST_CASE("step cursors yield their coroutines' steps", "[exhaustive]") {
  for (const char* algorithm : {"dual-root", "binomial"})
    for (int p = 1; p <= 70; p += (p < 20 ? 1 : 7))
      for (std::uint64_t count : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{5}, std::uint64_t{1000}})
        for (int blocks : {1, 2, 3, 16}) {
          Shape shape;
          shape.ranks = p;
          shape.count = count;
          shape.blocks = blocks;
          check_cursor_matches(algorithm, shape);
        }
  Shape deep;  // deeper than the block count: rounds in which some slots are void
  deep.ranks = 4097;
  deep.count = 1 << 20;
  deep.blocks = 4;
  check_cursor_matches("dual-root", deep);
  check_cursor_matches("binomial", deep);
}
