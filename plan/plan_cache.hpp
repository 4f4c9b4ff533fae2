#pragma once
// The one plan cache of a Comm (thread or MPI): compiled entries keyed by
// the call (CallKey, plan/planner.hpp), the datatype and the operator's
// identity (ReduceOp::identity, held so that its address is not reused while
// cached). Least recently used first out, within two bounds: `capacity`
// entries in all, and `keyed` arrival-keyed entries per call shape
// (ArrivalOptions::plans). A plan is a pure function of its key, so evicting
// on one rank and not another never makes two ranks run different schedules.

#include <cstddef>
#include <limits>
#include <list>
#include <memory>

#include "common/reduce_op.hpp"
#include "plan/planner.hpp"

namespace copse {

template <class Value>
class PlanCache {
 public:
  struct Item {
    CallKey call;
    DType dtype;
    std::shared_ptr<const void> op_identity;
    Value value;
  };

  explicit PlanCache(std::size_t capacity = std::numeric_limits<std::size_t>::max(), std::size_t keyed = 8)
      : capacity_(capacity), keyed_(keyed) {}

  // The item of this call, made the most recently used; null if none.
  Item* find(const CallKey& call, DType dtype, const void* op_identity) {
    auto matches = [&](const Item& i) {
      return i.dtype == dtype && i.op_identity.get() == op_identity && i.call.same_call(call);
    };
    // A repeated call finds itself in front (no list walk).
    if (!items_.empty() && matches(items_.front())) return &items_.front();
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (matches(*it)) {
        items_.splice(items_.begin(), items_, it);
        return &items_.front();
      }
    return nullptr;
  }

  // An item of this call, whatever its datatype and operator (equal calls
  // have equal plans), leaving the order alone (an accessor's look must not
  // change what a rank evicts next); null if none.
  const Item* peek(const CallKey& call) const {
    for (const Item& i : items_)
      if (i.call.same_call(call)) return &i;
    return nullptr;
  }

  // Adds an item as the most recently used, then evicts past the bounds.
  // `on_evict(value)` sees every item that goes.
  template <class OnEvict>
  Item& insert(Item item, OnEvict&& on_evict) {
    items_.push_front(std::move(item));
    const Item& fresh = items_.front();
    if (fresh.call.arrival) {
      std::size_t keyed = 0;
      for (auto it = std::next(items_.begin()); it != items_.end();) {
        const bool same = it->call.arrival && it->dtype == fresh.dtype && it->op_identity == fresh.op_identity &&
                          it->call.same_shape(fresh.call);
        if (same && ++keyed >= keyed_) {
          on_evict(it->value);
          it = items_.erase(it);
        } else {
          ++it;
        }
      }
    }
    while (items_.size() > capacity_) {
      on_evict(items_.back().value);
      items_.pop_back();
    }
    return items_.front();
  }
  Item& insert(Item item) {
    return insert(std::move(item), [](const Value&) {});
  }

  std::size_t size() const { return items_.size(); }

 private:
  std::size_t capacity_, keyed_;
  std::list<Item> items_;  // most recently used first
};

}  // namespace copse
