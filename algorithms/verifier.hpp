#pragma once
// The verifier: symbolic execution of every rank's schedule. Each element
// holds a product x_a ⊙ ... ⊙ x_b written as a rank interval (cyclic for
// algorithms that need commutativity); a combine must join adjacent intervals
// in rank order (or, for commutative algorithms, any two products without
// overlap: a set of ranks that is no interval is kept as a set). Proves: sends and receives match with equal sizes, no
// deadlock, and at the end every rank (allreduce) or the root (reduce) holds
// x_0 ⊙ ... ⊙ x_{p-1} in every element, or every rank holds the root's data
// (bcast). The data-movement collectives (scatter, gather, alltoall) track
// instead where each element started (rank s's element e), and prove that
// every rank ends with exactly its blocks, each element in its place, and
// that nothing is combined. A failure names the rank, step and block/element.

#include <string>

#include "algorithms/registry.hpp"

namespace copse {

struct VerifyResult {
  bool proven = false;
  std::string message;  // empty when proven
};

// Throws UsageError for an invalid shape or one too large to hold symbolically
// (ranks x count above 2^28).
VerifyResult verify(const AlgorithmInfo& algorithm, const Shape& shape);
// The same for a schedule that is not the registry entry's own (a hierarchical
// composition): `algorithm` supplies the collective and commutativity needs.
VerifyResult verify(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape);

}  // namespace copse
