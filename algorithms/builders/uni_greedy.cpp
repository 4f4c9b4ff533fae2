// Uni-greedy reduce (Lowery–Langou, §V, Algorithm 1): the optimal pipelined
// reduction for unidirectional ports among those that reduce segments in
// order (their Theorem 5), for commutative operators.
//
// Segments are scheduled one after another. For segment i every rank starts
// from its state x_r, the time it finished its previous task; the two ranks
// with the smallest states are paired (Lemma 1 with t = x_g2: the earlier
// one sends, unless it is the root, which never sends), the transfer starts
// at t = x_g2, the sender is then free at t + t_comm(i) and done with segment
// i, the receiver at t + t_comm(i) + t_comp(i). After p-1 pairs only the root
// holds segment i, and every rank's final state is its start state for
// segment i+1 (X_{i+1} = X_i^(1) ∪ S_i^(1)).
//
// t_comm(i) = alpha + beta*s_i and t_comp(i) = gamma*s_i are the cost model's
// (PlanHints: the model the schedule will run under; without hints the
// documented defaults), computed as the engines charge them, so the
// simulator's time for this schedule under unidirectional ports and one link
// level is exactly the state x_root that Algorithm 1 ends with. The model's
// ratios shape the schedule; a wrong model leaves it correct, only slower.
//
// Example (in Fig. 3's units), p = 4, root 0, t_comm = 2, t_comp = 1, ties
// going to the lower rank: at t = 0 the pairs are 1 -> 0 (the root receives)
// and 2 -> 3; 0 and 3 are free at 3, so 3 -> 0 at t = 3, and the root holds
// the sum at 6 -- a binomial tree. A second segment starts from the states
// (0: 6, 1: 2, 2: 2, 3: 5): 1 -> 2 at t = 2, 2 -> 3 at 5, 3 -> 0 at 8, and
// the root is done at 11: segment 1 travels while segment 0 is still going.
//
// Each rank's steps are its pairs in the order Algorithm 1 made them: a rank's
// state only grows, so that is also time order, and both sides of every pair
// list it in the same place, so the schedule cannot deadlock. Segments come
// from PlanHints::segments when given (Lowery–Langou §VIII, unequal
// segmentation), else from BlockPartition(count, blocks).
#include <memory>
#include <queue>

#include "algorithms/builders/planning.hpp"
#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

struct Pairing {
  int peer;
  int segment;
  bool send;  // else receive and combine
};

struct UniGreedy {
  Segments segments;
  std::vector<std::vector<Pairing>> ops;  // per rank, in time order
};

std::shared_ptr<const UniGreedy> plan_uni_greedy(const Shape& shape) {
  auto plan = std::make_shared<UniGreedy>(UniGreedy{Segments(shape), {}});
  const int p = shape.ranks;
  plan->ops.resize(static_cast<std::size_t>(p));
  std::vector<Picos> x(static_cast<std::size_t>(p), 0);  // X: each rank's state
  using Entry = std::pair<Picos, int>;                   // (state, rank): ties go to the lower rank
  for (int i = 0; i < plan->segments.count(); ++i) {
    const Picos comm = predicted_transfer(shape, plan->segments.size(i));
    const Picos comp = predicted_combine(shape, plan->segments.size(i));
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> holders;  // ranks yet to send segment i
    for (int r = 0; r < p; ++r) holders.push({x[static_cast<std::size_t>(r)], r});
    for (int n = p; n >= 2; --n) {
      const int g1 = holders.top().second;
      holders.pop();
      const int g2 = holders.top().second;
      holders.pop();
      const int sender = g1 == shape.root ? g2 : g1, receiver = g1 == shape.root ? g1 : g2;
      const Picos t = x[static_cast<std::size_t>(g2)];
      x[static_cast<std::size_t>(sender)] = t + comm;
      x[static_cast<std::size_t>(receiver)] = t + comm + comp;
      plan->ops[static_cast<std::size_t>(sender)].push_back({receiver, i, true});
      plan->ops[static_cast<std::size_t>(receiver)].push_back({sender, i, false});
      holders.push({x[static_cast<std::size_t>(receiver)], receiver});
    }
  }
  return plan;
}

RankSchedule uni_greedy_rank(std::shared_ptr<const UniGreedy> plan, int rank) {
  for (const Pairing& op : plan->ops[static_cast<std::size_t>(rank)]) {
    Step s;
    if (op.send) {
      s.send = plan->segments.transfer(op.segment, op.peer);
    } else {
      s.recv = plan->segments.transfer(op.segment, op.peer);
      s.combine = patterns::side_of(op.peer, rank);  // any side: the operator commutes
    }
    co_yield s;
  }
}

}  // namespace

SchedulePlan uni_greedy_reduce(const Shape& shape) {
  auto plan = plan_uni_greedy(shape);
  return [plan](int rank) { return uni_greedy_rank(plan, rank); };
}

}  // namespace copse::builders
