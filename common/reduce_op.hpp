#pragma once
// Datatypes and reduction operators on real data.
//
// An element is what a schedule counts: one value of the datatype, except for
// the non-commutative test operator `affine`, whose element is a pair (a, b)
// of the datatype standing for x -> a*x + b; (a1,b1) ⊙ (a2,b2) is "apply the
// first, then the second": (a1*a2, a2*b1 + b2). Affine is defined on the
// integer types, computed with wrap-around (unsigned) arithmetic so it is
// exact and associative.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.hpp"
#include "common/schedule.hpp"

namespace copse {

// inout = in ⊙ inout (Combine::left) or inout ⊙ in (Combine::right), n elements.
using CombineFn = std::function<void(void* inout, const void* in, std::size_t n, Combine side)>;

struct ReduceOp {
  std::string name;
  DType dtype = DType::int32;
  bool commutative = true;
  std::size_t element_bytes = 4;  // bytes per schedule element
  CombineFn combine;
  // Which operator this is: copies share it, builtin_op gives every call for
  // the same name and datatype the same one, and every user_op call a new
  // one (two user operators may share a name and differ in commutativity).
  // Plan caches key by it and hold it, so it is never reused while cached.
  // Null for an operator assembled by hand.
  std::shared_ptr<const void> identity;
};

// Built-in operators: sum, prod, min, max, band, bor, bxor, land, lor, affine.
// Throws UsageError for an unknown name or one not defined on the datatype
// (bitwise ops and affine on floating types).
ReduceOp builtin_op(std::string_view name, DType dtype);
std::span<const std::string_view> builtin_op_names();

// A user-supplied operator: `fn(inout, in, n)` computes inout = in ⊙ inout
// elementwise when called for Combine::left and is swapped accordingly, so
// users write one function for "a ⊙ b -> b".
ReduceOp user_op(std::string name, DType dtype, bool commutative, std::size_t element_bytes,
                 std::function<void(const void* a, void* b, std::size_t n)> a_op_b_into_b);

// Deterministic test input for (rank, element), chosen per operator so that
// the sequential reference is exact in every datatype (small integers for
// sums, +-1 for products, 0/1 for logical ops, ...). Writes `count` elements.
void fill_input(const ReduceOp& op, int rank, std::uint64_t count, void* out);

// The sequential reference x_0 ⊙ x_1 ⊙ ... ⊙ x_{p-1} of the fill_input data.
std::vector<std::byte> reference_result(const ReduceOp& op, int ranks, std::uint64_t count);

}  // namespace copse
