// Ring allreduce: reduce-scatter then allgather around the ring, p-1 steps
// each, one p-th of the vector per step. Chunk k accumulates the ranks after
// it cyclically (x_{k+1} ... x_k), so the operator must be commutative.
#include "algorithms/shift_plan.hpp"
#include "common/schedule.hpp"

namespace copse::builders {

namespace {

RankSchedule ring_rank(Shape shape, int rank) {
  const long p = shape.ranks;
  if (p == 1) co_return;
  const BlockPartition chunks(shape.count, shape.ranks);
  const int right = static_cast<int>((rank + 1) % p), left = static_cast<int>((rank + p - 1) % p);
  auto chunk = [p](long k) { return ((k % p) + p) % p; };
  for (long s = 0; s < p - 1; ++s) {  // after step s, rank r holds chunk r-s-1 over s+2 ranks
    Step step;
    step.send = chunks.transfer(chunk(rank - s), right);
    step.recv = chunks.transfer(chunk(rank - s - 1), left);
    step.combine = Combine::left;
    if (!step.empty()) co_yield step;
  }
  for (long s = 0; s < p - 1; ++s) {  // rank r starts out owning the finished chunk r+1
    Step step;
    step.send = chunks.transfer(chunk(rank + 1 - s), right);
    step.recv = chunks.transfer(chunk(rank - s), left);
    step.combine = Combine::replace;
    if (!step.empty()) co_yield step;
  }
}

}  // namespace

SchedulePlan ring_allreduce(const Shape& shape) {
  SchedulePlan plan = [shape](int rank) { return ring_rank(shape, rank); };
  // Chunk r - t moves from rank r to r+1 at step t of the reduce-scatter,
  // chunk r + 1 - t at step t of the allgather: the simulator may run the
  // plan as one profile over the chunks (algorithms/shift_plan.hpp).
  const std::int64_t steps = shape.ranks - 1;
  return ShiftPlan{std::move(plan),
                   BlockPartition(shape.count, shape.ranks),
                   {ShiftPhase{steps, 0, Combine::left}, ShiftPhase{steps, 1, Combine::replace}}};
}

}  // namespace copse::builders
