// Bi-greedy reduce (Lowery–Langou, §VI-B, Algorithm 2) and an allreduce made
// of it and its mirror image, for commutative operators.
//
// With bidirectional ports a rank sends one segment and receives another in
// the same round. Algorithm 2 fills the ports round by round, giving priority
// to segments with smaller indices: for segment j, the ranks still holding it
// (not yet sent; the root never sends, Lemma 1 (ii)) are split into those
// that can only send this round (their receive port is taken), those that can
// only receive (their send port is taken) and those free for both; the free
// ones are divided so that senders and receivers balance, and senders are
// paired with receivers in order. A rank that receives segment j in a round
// sends it at the earliest in the next, when its combine is done.
//
// Here a round is one transfer and its combine, alpha + beta*s + gamma*s for
// segments of s elements: the unit of Table III, where bi-greedy matches the
// reverse of an optimal broadcast, ceil(log2 p) + q - 1 rounds for q
// segments. (Algorithm 2 counts time in smaller ticks, t_comm and t_comp
// apart; in rounds the same rule needs no computation set COMP.) The paper
// conjectures the round count from experiments; tests/test_greedy.cpp checks
// it in the simulator for p up to 1024 and q up to 64.
//
// Example, p = 4, q = 2, root 0. Round 0, segment 0: everyone holds it; 0 can
// only receive, 1-3 are free, so two of the free ones send (2 -> 0, 3 -> 1);
// segment 1: only rank 1's send port and ranks 2 and 3's receive ports are
// left: 1 -> 2. Round 1: 1 -> 0 (segment 0), 3 -> 2 (segment 1). Round 2:
// 2 -> 0 (segment 1). Three rounds = log2 4 + 2 - 1.
//
// Each rank's steps are its rounds in order (send and receive of one round in
// one step), so partners always meet in the same round and the schedule
// cannot deadlock. The allreduce reduces to rank 0 and then runs the reduce
// backwards as a broadcast: reduce round r, a -> b with segment j, becomes
// broadcast round R-1-r, b -> a with the finished segment j. The broadcast
// starts with the segment the root finished last, so it follows the reduce
// without a gap: 2(ceil(log2 p) + q - 1) rounds.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "algorithms/patterns.hpp"

namespace copse::builders {

namespace {

struct RoundStep {
  long round;
  int send_peer = -1, send_segment = -1;
  int recv_peer = -1, recv_segment = -1;
};

struct BiGreedy {
  BlockPartition part;
  long rounds = 0;
  std::vector<std::vector<RoundStep>> steps;  // per rank, by round
};

// This round's step of `rank`, appended if it has none yet.
RoundStep& step_in(BiGreedy& plan, int rank, long round) {
  auto& mine = plan.steps[static_cast<std::size_t>(rank)];
  if (mine.empty() || mine.back().round != round) mine.push_back(RoundStep{round});
  return mine.back();
}

std::shared_ptr<const BiGreedy> plan_bi_greedy(int p, std::uint64_t count, int blocks, int root) {
  auto plan = std::make_shared<BiGreedy>();
  plan->part = BlockPartition(count, blocks);
  plan->steps.resize(static_cast<std::size_t>(p));
  const int q = count > 0 ? plan->part.blocks : 0;
  // holders[j]: ranks that have not sent segment j yet, in rank order.
  std::vector<std::vector<int>> holders(static_cast<std::size_t>(q));
  for (auto& h : holders)
    for (int r = 0; r < p; ++r) h.push_back(r);
  // Ports taken in the current round: taken[r] == round.
  std::vector<long> send_taken(static_cast<std::size_t>(p), -1), recv_taken(static_cast<std::size_t>(p), -1);
  std::vector<int> senders, receivers, free;
  std::vector<bool> sent(static_cast<std::size_t>(p), false);
  int first = 0;  // segments before it are complete at the root
  for (long round = 0; first < q; ++round) {
    int free_send = p - 1, free_recv = p;  // ports left this round (the root never sends)
    for (int j = first; j < q && free_send > 0 && free_recv > 0; ++j) {
      auto& h = holders[static_cast<std::size_t>(j)];
      if (h.size() <= 1) continue;
      senders.clear(), receivers.clear(), free.clear();
      for (int r : h) {
        const bool can_send = r != root && send_taken[static_cast<std::size_t>(r)] != round;
        const bool can_recv = recv_taken[static_cast<std::size_t>(r)] != round;
        if (can_send && can_recv)
          free.push_back(r);
        else if (can_send)
          senders.push_back(r);
        else if (can_recv)
          receivers.push_back(r);
      }
      // Algorithm 2's balancing: the free ranks first even out the sides,
      // then split half and half; senders come from the end of the free
      // list, receivers from its start.
      const auto s = static_cast<long>(senders.size()), r = static_cast<long>(receivers.size());
      const auto f = static_cast<long>(free.size());
      long to_senders = 0, to_receivers = 0;
      if (s == r) {
        to_senders = to_receivers = f / 2;
      } else {
        const long m = std::min(f, std::abs(r - s)), x = (f - m) / 2;
        to_senders = s < r ? m + x : x;
        to_receivers = s < r ? x : m + x;
      }
      senders.insert(senders.end(), free.end() - to_senders, free.end());
      receivers.insert(receivers.end(), free.begin(), free.begin() + to_receivers);
      const std::size_t pairs = std::min(senders.size(), receivers.size());
      // A segment nobody has sent yet that finds no pair leaves none for the
      // later ones: they are untouched too, with the same ports to use.
      if (pairs == 0 && h.size() == static_cast<std::size_t>(p)) break;
      for (std::size_t k = 0; k < pairs; ++k) {
        const int a = senders[k], b = receivers[k];
        send_taken[static_cast<std::size_t>(a)] = round;
        recv_taken[static_cast<std::size_t>(b)] = round;
        --free_send, --free_recv;
        RoundStep& out = step_in(*plan, a, round);
        out.send_peer = b, out.send_segment = j;
        RoundStep& in = step_in(*plan, b, round);
        in.recv_peer = a, in.recv_segment = j;
      }
      // The senders are done with segment j.
      for (std::size_t k = 0; k < pairs; ++k) sent[static_cast<std::size_t>(senders[k])] = true;
      std::erase_if(h, [&](int rank) { return sent[static_cast<std::size_t>(rank)]; });
      for (std::size_t k = 0; k < pairs; ++k) sent[static_cast<std::size_t>(senders[k])] = false;
    }
    while (first < q && holders[static_cast<std::size_t>(first)].size() <= 1) ++first;
    plan->rounds = round + 1;
  }
  return plan;
}

Step reduce_step(const BiGreedy& plan, const RoundStep& r, int rank) {
  Step s;
  s.send = plan.part.transfer(r.send_segment, r.send_peer);
  s.recv = plan.part.transfer(r.recv_segment, r.recv_peer);
  s.combine = patterns::side_of(r.recv_peer, rank);  // any side: the operator commutes
  return s;
}

// The same round run backwards: what came in goes out, finished.
Step mirrored_step(const BiGreedy& plan, const RoundStep& r) {
  Step s;
  s.send = plan.part.transfer(r.recv_segment, r.recv_peer);
  s.recv = plan.part.transfer(r.send_segment, r.send_peer);
  s.combine = Combine::replace;
  return s;
}

RankSchedule bi_greedy_rank(std::shared_ptr<const BiGreedy> plan, int rank, bool allreduce) {
  const auto& mine = plan->steps[static_cast<std::size_t>(rank)];
  for (const RoundStep& r : mine) co_yield reduce_step(*plan, r, rank);
  if (!allreduce) co_return;
  for (auto it = mine.rbegin(); it != mine.rend(); ++it) co_yield mirrored_step(*plan, *it);
}

}  // namespace

SchedulePlan bi_greedy_reduce(const Shape& shape) {
  auto plan = plan_bi_greedy(shape.ranks, shape.count, shape.blocks, shape.root);
  return [plan](int rank) { return bi_greedy_rank(plan, rank, false); };
}

SchedulePlan bi_greedy_allreduce(const Shape& shape) {
  auto plan = plan_bi_greedy(shape.ranks, shape.count, shape.blocks, 0);
  return [plan](int rank) { return bi_greedy_rank(plan, rank, true); };
}

}  // namespace copse::builders
