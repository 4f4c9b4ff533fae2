#pragma once
// The schedule representation: what one rank does, step by step.
//
// A step is at most one send and one receive, performed concurrently (Träff's
// telephone-like bidirectional communication, MPI_Sendrecv), and an optional
// local copy applied after them. Every quantity is in elements of the user's
// vector; engines multiply by the element size.
//
// Semantics every engine honours (the verifier checks schedules against them):
//  1. The send transmits its region as it was when the step began.
//  2. The receive lands at the end of the step: `replace` overwrites the
//     region, `left` makes it received ⊙ held, `right` makes it held ⊙ received.
//  3. The copy runs after the receive.
//  4. Matching is by (source, destination) pair in program order, not by step
//     index, and is rendezvous: a step ends only when its send has been
//     received, so a schedule that is deadlock-free here is deadlock-free on
//     any engine.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/generator.hpp"

namespace copse {

enum class Combine : std::uint8_t {
  replace,  // region = received
  left,     // region = received ⊙ region   (sender's data comes first in rank order)
  right,    // region = region ⊙ received   (sender's data comes after)
};

struct Transfer {
  std::int32_t peer = -1;  // -1: no transfer in this step
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  explicit operator bool() const { return peer >= 0; }
};

struct LocalCopy {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  std::uint64_t count = 0;  // 0: no copy
};

struct Step {
  Transfer send;
  Transfer recv;
  Combine combine = Combine::replace;
  LocalCopy copy;

  bool empty() const { return !send && !recv && copy.count == 0; }
};

// Shape::count is the elements each rank contributes. Allreduce, reduce and
// bcast work on a vector of that length; allgather and reduce_scatter on
// ranks * count elements (rank r's block at r * count); a barrier is an
// allreduce of one element (of zero bytes, on a real engine).
// The data-movement collectives (issue 19) combine nothing:
//  - scatter: ranks * count elements; the root starts with every block (rank
//    r's at r * count), and rank r ends with its block at r * count (what it
//    holds elsewhere is scratch);
//  - gather: the reverse: rank r starts with its block at r * count, and the
//    root ends with every block in rank order;
//  - alltoall: 2 * ranks * count elements, MPI's two buffers one after the
//    other: the send area [0, ranks * count), block d for rank d at d * count,
//    then the receive area, where block s from rank s must end at
//    (ranks + s) * count. Schedules may use the send area as scratch once
//    they have sent from it (an engine gives them a copy of the user's).
enum class Collective { allreduce, reduce, bcast, barrier, allgather, reduce_scatter, scatter, gather, alltoall };
// Every collective: each has schedules (the registry, the verifier, the
// simulator, `copse sim` and `copse verify`), and the runtime serves each
// (the Comms, the planner, the configuration, the MPI interposer).
std::span<const Collective> all_collectives();
std::string_view to_string(Collective c);
Collective parse_collective(std::string_view name);  // throws UsageError

class CostModel;  // common/cost_model.hpp

// What a builder may know beyond the problem itself: predictions about the
// machine and the moment. Most builders ignore it. Hints change how fast a
// schedule is, never whether it is right: the verifier proves a schedule for
// whatever hints it was built with, and every engine runs it as it is.
//  - `model`, `element_bytes`: the cost model the schedule is expected to run
//    under. Lowery–Langou's greedy reductions are built from its per-segment
//    communication and computation times (their §V, t_comm and t_comp).
//  - `arrival`: each rank's predicted arrival at the collective, in
//    picoseconds from any common origin. Proficz's SLT and PRR order the
//    ranks by it and plan pre-steps from its gaps (Proficz 2018, §4).
//  - `segments`: explicit segment sizes (Lowery–Langou §VIII, unequal
//    segmentation) for the builders that take them; the count of segments
//    then replaces Shape::blocks.
// Builders read them through algorithms/builders/planning.hpp, which
// supplies the defaults (the documented CostModel(), simultaneous arrival).
struct PlanHints {
  std::shared_ptr<const CostModel> model;  // null: CostModel()
  std::uint64_t element_bytes = 1;
  std::vector<std::int64_t> arrival;    // one per rank, or empty: all arrive together
  std::vector<std::uint64_t> segments;  // sizes summing to Shape::count, or empty: BlockPartition(count, blocks)
};

// The whole problem an algorithm is planned for.
struct Shape {
  int ranks = 1;
  std::uint64_t count = 0;                           // elements per rank
  int blocks = 1;                                    // pipeline blocks (algorithms that do not pipeline ignore it)
  int root = 0;                                      // reduce / bcast / scatter / gather root
  std::shared_ptr<const PlanHints> hints = nullptr;  // null: none (see PlanHints)
  // The v-variants (issue 19): blocks of unequal sizes, packed in rank order
  // (algorithms/block_layout.hpp). Allgather, reduce_scatter, scatter,
  // gather: p counts, rank r's block; alltoall: p * p, [s * p + d] the
  // elements rank s sends rank d. Null: every block is `count`. Only the
  // registry rows marked unequal_counts take them.
  std::shared_ptr<const std::vector<std::uint64_t>> counts = nullptr;
};

using RankSchedule = Generator<Step>;
// A planned algorithm: shared precomputation (if any) lives in the captured
// state; calling it for a rank yields that rank's schedule lazily.
using SchedulePlan = std::function<RankSchedule(int rank)>;

// Balanced split of `count` elements into blocks: sizes differ by at most one,
// and the block count is clamped to [1, max(count, 1)] so no block is empty
// when there is data. Blocks outside [0, blocks) are void (size 0), which lets
// pipelined loops run past either end without special cases (Träff 2021 §1.1).
struct BlockPartition {
  std::uint64_t base = 0;  // first element covered
  std::uint64_t count = 0;
  int blocks = 1;

  BlockPartition() = default;
  BlockPartition(std::uint64_t count_, int requested_blocks, std::uint64_t base_ = 0) : base(base_), count(count_) {
    std::uint64_t b = requested_blocks < 1 ? 1 : static_cast<std::uint64_t>(requested_blocks);
    if (count_ > 0 && b > count_) b = count_;
    blocks = static_cast<int>(b);
  }
  bool valid(long j) const { return count > 0 && j >= 0 && j < blocks; }
  std::uint64_t offset(long j) const {
    const auto q = count / static_cast<std::uint64_t>(blocks);
    const auto r = count % static_cast<std::uint64_t>(blocks);
    const auto uj = static_cast<std::uint64_t>(j);
    return base + uj * q + (uj < r ? uj : r);
  }
  std::uint64_t size(long j) const {
    if (!valid(j)) return 0;
    const auto q = count / static_cast<std::uint64_t>(blocks);
    const auto r = count % static_cast<std::uint64_t>(blocks);
    return q + (static_cast<std::uint64_t>(j) < r ? 1 : 0);
  }
  // The transfer of block j with `peer`, or no transfer if block j is void.
  Transfer transfer(long j, int peer) const {
    if (!valid(j) || peer < 0) return {};
    return Transfer{peer, offset(j), size(j)};
  }
};

}  // namespace copse
