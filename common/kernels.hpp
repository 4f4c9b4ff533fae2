#pragma once
// The built-in reduction kernels: inout = in ⊙ inout (Combine::left) or
// inout ⊙ in (Combine::right) over n elements, or a plain copy (replace).
//
// They live in a translation unit of their own, compiled at -O3 whatever the
// build type, with one clone per x86-64 instruction-set level -- x86-64-v4
// (AVX-512), x86-64-v3 (AVX2), and the baseline -- of which the loader picks
// the best this CPU runs (GCC's target_clones, an ifunc). So every build, the
// Debug one included, reduces at memory speed, and a binary built here runs
// anywhere (no -march=native). bench/bench_kernels measures each kernel
// against the a += b bound.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/dtype.hpp"
#include "common/schedule.hpp"

namespace copse {

enum class BuiltinOp : std::uint8_t { sum, prod, min, max, band, bor, bxor, land, lor, affine };

std::span<const BuiltinOp> all_builtin_ops();
std::string_view to_string(BuiltinOp op);
// The operator whose element is a pair of the datatype (x -> a*x + b).
inline bool pairs(BuiltinOp op) { return op == BuiltinOp::affine; }
inline bool commutes(BuiltinOp op) { return op != BuiltinOp::affine; }

using CombineKernel = void (*)(void* inout, const void* in, std::size_t n, Combine side);

// The kernel of `op` on `dtype`; nullptr when the operator is not defined on
// the datatype (the bitwise operators and affine on floating types). Integer
// arithmetic wraps around (as in C, and MPICH); affine's element is the pair
// (a, b) standing for x -> a*x + b, composed "first, then second":
// (a1,b1) ⊙ (a2,b2) = (a1*a2, a2*b1 + b2).
CombineKernel combine_kernel(BuiltinOp op, DType dtype);

// A 32-bit integer hash (lowbias32), the deterministic test input's
// (common/reduce_op.cpp's fill_input).
constexpr std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

// out[j] = mix32(((k0 + j) * multiplier) ^ seed) for j below n: the test
// input's one loop of 32-bit multiplies, with the kernels' per-ISA clones
// (AVX2 multiplies eight lanes at once; the baseline has no 32-bit vector
// multiply).
void hash_indices(std::uint32_t k0, std::uint32_t n, std::uint32_t multiplier, std::uint32_t seed, std::uint32_t* out);

}  // namespace copse
