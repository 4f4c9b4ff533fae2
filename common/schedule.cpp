#include "common/schedule.hpp"

#include <algorithm>
#include <array>
#include <string>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

namespace {
constexpr std::array kCollectives = {Collective::allreduce, Collective::reduce,    Collective::bcast,
                                     Collective::barrier,   Collective::allgather, Collective::reduce_scatter,
                                     Collective::scatter,   Collective::gather,    Collective::alltoall};
}  // namespace

std::span<const Collective> all_collectives() { return kCollectives; }

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::allreduce: return "allreduce";
    case Collective::reduce: return "reduce";
    case Collective::bcast: return "bcast";
    case Collective::barrier: return "barrier";
    case Collective::allgather: return "allgather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::scatter: return "scatter";
    case Collective::gather: return "gather";
    case Collective::alltoall: return "alltoall";
  }
  return "?";
}

Collective parse_collective(std::string_view name) {
  for (Collective c : kCollectives)
    if (to_string(c) == name) return c;
  throw UsageError("unknown collective '" + std::string(name) + "' (known: " + join(kCollectives, ", ") + ")");
}

}  // namespace copse
