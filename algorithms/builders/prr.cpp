// Pre-reduced ring allreduce (Proficz 2018, §4.2, Fig. 7), for commutative
// operators. The ranks are renumbered by predicted arrival (PlanHints) and
// form a ring, earliest first; the vector is cut into P segments as in the
// ring. Where the ring starts segment j at id j, PRR lets the early ranks
// run pre-steps while the late ones still compute:
//
//   k_{P-1} = 0; for i = P-2 .. 0: k_i = k_{i+1} + 1 if a_{P-1} - a_{i+1} >=
//   (k_{i+1} + 1) tau, else k_{i+1}                      (Fig. 7, lines 1-6)
//
// with a_i the predicted arrival of id i and tau the time to transfer and
// reduce one segment. Id i then starts the segments (i-1 + k_{i-1}, i + k_i]
// (id 0: [0, k_0]; lines 7-13, sp_j), so the earliest starts several; each
// segment is reduced once around the ring and is complete at rp_j = sp_j - 1,
// from where the result goes once more around (the override loop).
// Example, P = 4, id 3 late by 2 tau: k = (2, 1, 0, 0): id 0 starts segments
// 0-2, id 3 segment 3; segments 0-2 are reduced by ids 0-2 while id 3
// is away and completed by it (rp = 3); id 3's own segment goes round from
// it (rp = 2). With balanced arrival every k is 0 and PRR is the ring, step for
// step.
//
// Three readings of Fig. 7, whose loops do not run as printed:
//  - lines 9-12 move to the next id once per segment; where k drops by one
//    per id (a late rank long after the rest) that would give segment j to
//    an id whose range ends before j, so the next id is taken until
//    i + k_i >= j;
//  - line 19 ("(rp_si + P - 1) mod P != is") would stop a segment one hop
//    before its last reducer; the reduce loop passes on a segment unless the
//    rank is its last reducer, and the override loop as line 25 says;
//  - the loops run one after the other with blocking receives and
//    non-blocking sends, so a rank forwards finished segments while it still
//    reduces others. Under copse's rendezvous steps that needs the steps in
//    time order, which replaying the ring against the predicted arrivals
//    gives (arrival_ring.hpp): each rank passes on what it received first,
//    ties in Fig. 7's order, si = id + k_id downwards (lines 14, 21).
//
// Pipelining: Shape::blocks counts blocks of the whole vector, as for every
// pipelined algorithm; each segment gets ceil(blocks / P) of them, which
// follow it down its path one after another (up to P blocks: the paper's
// algorithm). After a long wait the ranks still to act form a chain through
// the late rank, which pipelines only with smaller pieces. tau is then a
// whole segment's time: its blocks x (transfer + combine of one block).
#include "algorithms/builders/arrival_ring.hpp"
#include "algorithms/builders/planning.hpp"

namespace copse::builders {

SchedulePlan prr_allreduce(const Shape& shape) {
  const int p = shape.ranks;
  const std::vector<int> order = arrival_order(shape);
  const std::vector<Picos> arrival = predicted_arrivals(shape);
  auto a = [&](int id) { return arrival[static_cast<std::size_t>(order[static_cast<std::size_t>(id)])]; };

  const BlockPartition segments(shape.count, p);
  const int per_segment = (std::max(shape.blocks, 1) + p - 1) / p;
  const BlockPartition first(segments.size(0), per_segment);
  const Picos unit_time = predicted_transfer(shape, first.size(0)) + predicted_combine(shape, first.size(0));
  const Picos tau = first.blocks * unit_time;

  std::vector<long> k(static_cast<std::size_t>(p), 0);  // pre-steps (lines 1-6)
  for (int i = p - 2; i >= 0; --i) {
    const long next = k[static_cast<std::size_t>(i + 1)];
    k[static_cast<std::size_t>(i)] = a(p - 1) - a(i + 1) >= (next + 1) * tau ? next + 1 : next;
  }
  std::vector<RingUnit> units;  // segment j's blocks start at sp_j (lines 7-13)
  std::vector<int> segment_of;
  int i = 0;
  for (int j = 0; j < segments.blocks && shape.count > 0; ++j) {
    while (i + k[static_cast<std::size_t>(i)] < j) ++i;
    const BlockPartition blocks(segments.size(j), per_segment, segments.offset(j));
    for (int t = 0; t < blocks.blocks; ++t)
      if (blocks.size(t) > 0) {
        units.push_back(RingUnit{blocks.offset(t), blocks.size(t), i});
        segment_of.push_back(j);
      }
  }
  // Ties at id `at`: segments in the order si = at + k_at, at + k_at - 1, ...
  // (mod P), a segment's blocks in order.
  auto priority = [k, segment_of, p](int at, int unit) {
    const long si = (at + k[static_cast<std::size_t>(at)] - segment_of[static_cast<std::size_t>(unit)]) % p;
    return ((si + p) % p) * (long{1} << 32) + unit;
  };
  return ring_plan(std::make_shared<const ArrivalRing>(order, arrival_rounds(arrival, order, unit_time),
                                                       std::move(units), priority));
}

}  // namespace copse::builders
