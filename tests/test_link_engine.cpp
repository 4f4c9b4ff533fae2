// The link engine's own arithmetic: barrier generations.
#include <catch2/catch.hpp>

#include "transport/link_engine.hpp"

using copse::LinkEngine;

TEST_CASE("link engine: barrier generations wrap below the abort bit", "[link]") {
  constexpr std::uint32_t abort_bit = 0x80000000U;
  CHECK(LinkEngine::next_generation(0) == 1);
  CHECK(LinkEngine::next_generation(41) == 42);
  // The 2^31-th barrier: a plain increment would read as "aborted".
  CHECK(LinkEngine::next_generation(0x7fffffffU) == 0);
  CHECK((LinkEngine::next_generation(0x7fffffffU) & abort_bit) == 0);
  // An abort, once set, stays set whatever the count does.
  CHECK(LinkEngine::next_generation(abort_bit | 5U) == (abort_bit | 6U));
  CHECK(LinkEngine::next_generation(0xffffffffU) == abort_bit);
  // Every generation differs from the one before, so a waiter always sees the change.
  for (std::uint32_t w : {0U, 1U, 0x7ffffffeU, 0x7fffffffU, abort_bit, 0xfffffffeU, 0xffffffffU})
    CHECK(LinkEngine::next_generation(w) != w);
}
