#include "algorithms/builders/planning.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "common/error.hpp"

namespace copse::builders {

const CostModel& planning_model(const Shape& shape) {
  static const CostModel documented;
  return shape.hints && shape.hints->model ? *shape.hints->model : documented;
}

std::uint64_t planning_element_bytes(const Shape& shape) {
  return shape.hints ? std::max<std::uint64_t>(shape.hints->element_bytes, 1) : 1;
}

Picos predicted_transfer(const Shape& shape, std::uint64_t elements) {
  const CostModel& model = planning_model(shape);
  return model.transfer(std::min(1, model.levels() - 1), elements * planning_element_bytes(shape));
}

Picos predicted_combine(const Shape& shape, std::uint64_t elements) {
  Step receive;
  receive.recv = Transfer{0, 0, elements};
  receive.combine = Combine::left;
  return planning_model(shape).step_work(receive, planning_element_bytes(shape));
}

std::vector<Picos> predicted_arrivals(const Shape& shape) {
  if (!shape.hints || shape.hints->arrival.empty()) return std::vector<Picos>(static_cast<std::size_t>(shape.ranks), 0);
  if (shape.hints->arrival.size() != static_cast<std::size_t>(shape.ranks))
    throw UsageError("arrival estimates: " + std::to_string(shape.hints->arrival.size()) + " given for " +
                     std::to_string(shape.ranks) + " ranks");
  return shape.hints->arrival;
}

std::vector<int> arrival_order(const Shape& shape) {
  const std::vector<Picos> arrival = predicted_arrivals(shape);
  std::vector<int> order(static_cast<std::size_t>(shape.ranks));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return arrival[static_cast<std::size_t>(a)] < arrival[static_cast<std::size_t>(b)];
  });
  return order;
}

Segments::Segments(const Shape& shape) {
  if (shape.hints && !shape.hints->segments.empty()) {
    size_ = shape.hints->segments;
    if (std::find(size_.begin(), size_.end(), 0) != size_.end())
      throw UsageError("explicit segments: a segment of 0 elements");
    if (std::accumulate(size_.begin(), size_.end(), std::uint64_t{0}) != shape.count)
      throw UsageError("explicit segments do not add up to the " + std::to_string(shape.count) + " elements");
  } else if (shape.count > 0) {
    const BlockPartition part(shape.count, shape.blocks);
    for (int j = 0; j < part.blocks; ++j) size_.push_back(part.size(j));
  }
  std::uint64_t at = 0;
  for (std::uint64_t s : size_) offset_.push_back(at), at += s;
}

}  // namespace copse::builders
