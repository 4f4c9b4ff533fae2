#include "common/link.hpp"

#include <cstring>

namespace copse {

void apply_received(const LinkRank& c, std::byte* dst, const std::byte* src, std::uint64_t count, Combine side) {
  if (count == 0 || c.eb == 0) return;
  if (side == Combine::replace)
    std::memcpy(dst, src, static_cast<std::size_t>(count * c.eb));
  else
    c.op->combine(dst, src, static_cast<std::size_t>(count), side);
}

}  // namespace copse
