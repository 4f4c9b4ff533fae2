#pragma once
// The algorithm registry: every schedule builder by collective and name, with
// the one-line description that `copse algorithms`, help texts and logs share.

#include <span>
#include <string>
#include <string_view>

#include "common/schedule.hpp"

namespace copse {

struct AlgorithmInfo {
  Collective collective;
  std::string_view name;
  std::string_view description;
  bool needs_commutative;  // refuses non-commutative operators
  bool pipelined;          // honours Shape::blocks (others run unsegmented)
  SchedulePlan (*plan)(const Shape&);
  int pipelined_parts = 1;  // the vector is cut into this many parts, each pipelined in blocks
  // What the builder plans from besides the problem (PlanHints,
  // common/schedule.hpp): explicit segment sizes (unequal segmentation), and
  // the ranks' predicted arrival times.
  bool explicit_segments = false;
  bool arrival_aware = false;
};

// Elements of the vector a rank's schedule works on.
std::uint64_t vector_elements(Collective collective, const Shape& shape);

std::span<const AlgorithmInfo> algorithms();
// Throws UsageError naming the known algorithms for that collective. A name
// "file:PATH" loads, proves and registers a schedule file
// (internode/schedule_file.hpp, file_algorithm).
const AlgorithmInfo& find_algorithm(Collective collective, std::string_view name);

// Checks a shape against an algorithm: ranks >= 1, blocks >= 1, root in range.
// Throws UsageError with one clear sentence.
void validate_shape(const AlgorithmInfo& algorithm, const Shape& shape);

// Throws UsageError when the algorithm needs a commutative operator and
// `op_name` is not one.
void check_operator(const AlgorithmInfo& algorithm, std::string_view op_name, bool commutative);

// The block count a planned shape really uses: 1 for algorithms that do not
// pipeline; otherwise the blocks of one pipelined part, which never exceed its
// element count (two-tree pipelines each half separately).
int blocks_used(const AlgorithmInfo& algorithm, const Shape& shape);

}  // namespace copse
