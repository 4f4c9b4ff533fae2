#pragma once
// Inexact float inputs and their sequential sum, for the direct paths'
// bitwise checks (tests/test_direct_*.cpp): a path that associates the sum
// differently from ((x_0 + x_1) + x_2) + ... gets other bits.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace copse::testing {

using Bytes = std::vector<std::byte>;

// Rank `rank`'s `count` float32s for seed `seed`, as bytes: magnitudes
// 1e-4 apart between ranks, so that sums of them depend on their association.
inline Bytes random_floats(int rank, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 gen(seed * 1000 + static_cast<std::uint64_t>(rank));
  std::uniform_real_distribution<float> value(-1000.0f, 1000.0f);
  std::vector<float> v(count);
  for (float& x : v) x = value(gen) * (rank % 3 == 0 ? 1e-4f : 1.0f);
  Bytes b(count * sizeof(float));
  if (count > 0) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// ((x_0 + x_1) + x_2) + ... of ranks 0..p-1's random_floats: the sequential
// reference, written out.
inline Bytes float_reference(int p, std::size_t count, std::uint64_t seed) {
  std::vector<float> acc(count, 0.0f);
  for (int r = 0; r < p; ++r) {
    const Bytes x = random_floats(r, count, seed);
    for (std::size_t i = 0; i < count; ++i) {
      float xi = 0;
      std::memcpy(&xi, x.data() + i * sizeof(float), sizeof(float));
      acc[i] = r == 0 ? xi : acc[i] + xi;
    }
  }
  Bytes b(count * sizeof(float));
  if (count > 0) std::memcpy(b.data(), acc.data(), b.size());
  return b;
}

}  // namespace copse::testing
