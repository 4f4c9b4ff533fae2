#include "algorithms/builders/arrival_ring.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

namespace copse::builders {

ArrivalRing::ArrivalRing(std::vector<int> order, std::vector<long> arrival_round, std::vector<RingUnit> units,
                         const std::function<long(int position, int unit)>& priority)
    : order_(std::move(order)), units_(std::move(units)) {
  const int p = static_cast<int>(order_.size());
  position_of_.assign(order_.size(), 0);
  for (int i = 0; i < p; ++i) position_of_[static_cast<std::size_t>(order_[static_cast<std::size_t>(i)])] = i;
  steps_.resize(order_.size());
  if (p < 2 || units_.empty()) return;

  // Units a position holds: (round it may pass it on from, priority, unit).
  using Held = std::tuple<long, long, int>;
  using Queue = std::priority_queue<Held, std::vector<Held>, std::greater<>>;
  std::vector<Queue> held(order_.size());
  std::vector<int> hops(units_.size(), 0);  // 2(p-1) in all: p-1 reducing, p-1 finished
  const int last_hop = 2 * (p - 1);
  for (std::size_t u = 0; u < units_.size(); ++u) {
    const int at = units_[u].start;
    held[static_cast<std::size_t>(at)].push(
        {arrival_round[static_cast<std::size_t>(at)], priority(at, int(u)), int(u)});
  }
  auto step_of = [&](int position, long round) -> RoundStep& {
    auto& mine = steps_[static_cast<std::size_t>(position)];
    if (mine.empty() || mine.back().round != round) mine.push_back(RoundStep{round});
    return mine.back();
  };
  // The first round position i may pass on its next unit: when that unit is
  // ready and both ends of the link are there.
  auto next_send = [&](int i) {
    const auto& q = held[static_cast<std::size_t>(i)];
    if (q.empty()) return std::numeric_limits<long>::max();
    return std::max({std::get<0>(q.top()), arrival_round[static_cast<std::size_t>(i)],
                     arrival_round[static_cast<std::size_t>((i + 1) % p)]});
  };

  std::size_t finished = 0;
  long round = 0;
  while (finished < units_.size()) {
    long earliest = std::numeric_limits<long>::max();
    for (int i = 0; i < p; ++i) earliest = std::min(earliest, next_send(i));
    round = std::max(round, earliest);       // skip rounds in which nobody can move
    std::vector<std::pair<int, int>> moves;  // (from position, unit), applied after the round
    for (int i = 0; i < p; ++i)
      if (next_send(i) <= round) {
        moves.emplace_back(i, std::get<2>(held[static_cast<std::size_t>(i)].top()));
        held[static_cast<std::size_t>(i)].pop();
      }
    for (const auto& [from, u] : moves) {
      const int to = (from + 1) % p;
      const int hop = ++hops[static_cast<std::size_t>(u)];
      step_of(from, round).send_unit = u;
      RoundStep& in = step_of(to, round);
      in.recv_unit = u;
      in.combine = hop <= p - 1;
      if (hop < last_hop)
        held[static_cast<std::size_t>(to)].push({round + 1, priority(to, u), u});
      else
        ++finished;
    }
    ++round;
  }
  rounds_ = round;
}

RankSchedule ArrivalRing::rank_schedule(std::shared_ptr<const ArrivalRing> ring, int rank) {
  const auto& order = ring->order_;
  const int p = static_cast<int>(order.size());
  const int at = ring->position_of_[static_cast<std::size_t>(rank)];
  const int next = order[static_cast<std::size_t>((at + 1) % p)],
            prev = order[static_cast<std::size_t>((at + p - 1) % p)];
  for (const RoundStep& r : ring->steps_[static_cast<std::size_t>(at)]) {
    Step s;
    if (r.send_unit >= 0) {
      const RingUnit& u = ring->units_[static_cast<std::size_t>(r.send_unit)];
      s.send = Transfer{next, u.offset, u.count};
    }
    if (r.recv_unit >= 0) {
      const RingUnit& u = ring->units_[static_cast<std::size_t>(r.recv_unit)];
      s.recv = Transfer{prev, u.offset, u.count};
      s.combine = r.combine ? Combine::left : Combine::replace;  // any side: the operator commutes
    }
    co_yield s;
  }
}

std::vector<long> arrival_rounds(const std::vector<Picos>& arrival, const std::vector<int>& order, Picos round_time) {
  const Picos first = arrival.empty() ? 0 : *std::min_element(arrival.begin(), arrival.end());
  std::vector<long> rounds;
  for (int rank : order) {
    const Picos late = arrival[static_cast<std::size_t>(rank)] - first;
    rounds.push_back(round_time > 0 ? static_cast<long>((late + round_time - 1) / round_time) : 0);
  }
  return rounds;
}

}  // namespace copse::builders
