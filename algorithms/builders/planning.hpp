#pragma once
// Reading a Shape's PlanHints (common/schedule.hpp) in builders, with the
// defaults in one place: without hints a builder plans for the documented
// CostModel() with one-byte elements, for ranks that all arrive at once, and
// for BlockPartition(count, blocks) segments.

#include <vector>

#include "common/cost_model.hpp"
#include "common/schedule.hpp"

namespace copse::builders {

// The cost model the schedule is planned for.
const CostModel& planning_model(const Shape& shape);
std::uint64_t planning_element_bytes(const Shape& shape);

// Lowery–Langou §V's t_comm and t_comp for a segment of `elements`, as the
// engines charge them: the transfer at the model's inter-node level (their
// network is homogeneous; with one level that level), and the receiver's
// combine plus its per-message overhead (CostModel::step_work).
Picos predicted_transfer(const Shape& shape, std::uint64_t elements);
Picos predicted_combine(const Shape& shape, std::uint64_t elements);

// Each rank's predicted arrival (zeros without hints). UsageError unless the
// hints give one per rank.
std::vector<Picos> predicted_arrivals(const Shape& shape);
// The ranks in order of predicted arrival, earliest first; ties keep rank
// order, so without hints this is 0, 1, ..., p-1 (Proficz §4: "new
// identifiers are assigned to the processes according to the arrival order").
std::vector<int> arrival_order(const Shape& shape);

// The segments a pipelined builder cuts the vector into: the hints' explicit
// sizes, or BlockPartition(count, blocks). Segment j is [offset(j),
// offset(j) + size(j)); none is empty when count > 0.
class Segments {
 public:
  explicit Segments(const Shape& shape);  // UsageError if explicit sizes do not sum to count or one is 0
  int count() const { return static_cast<int>(size_.size()); }
  std::uint64_t size(int j) const { return size_[static_cast<std::size_t>(j)]; }
  std::uint64_t offset(int j) const { return offset_[static_cast<std::size_t>(j)]; }
  Transfer transfer(int j, int peer) const { return Transfer{peer, offset(j), size(j)}; }

 private:
  std::vector<std::uint64_t> size_, offset_;
};

}  // namespace copse::builders
