#include "common/reduce_op.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "common/kernels.hpp"
#include "common/text.hpp"

namespace copse {

namespace {

constexpr std::array kDTypes = {DType::int8,   DType::int16,  DType::int32,  DType::int64,   DType::uint8,
                                DType::uint16, DType::uint32, DType::uint64, DType::float32, DType::float64};

// A built-in operator is its kernel: one per operator and type, whose address
// never changes, so it names the operator without owning anything.
std::shared_ptr<const void> kernel_identity(CombineKernel kernel) {
  return std::shared_ptr<const void>(std::shared_ptr<const void>(), reinterpret_cast<const void*>(kernel));
}

// ---- deterministic test input ----------------------------------------------

enum class Input {
  small_ints,
  plus_minus_one,
  any,
  mostly_ones,
  mostly_zeros,
  random_bits,
  mostly_true,
  mostly_false,
  affine
};

Input input_kind(std::string_view name) {
  if (name == "sum") return Input::small_ints;
  if (name == "prod") return Input::plus_minus_one;
  if (name == "min" || name == "max") return Input::any;
  if (name == "band") return Input::mostly_ones;
  if (name == "bor") return Input::mostly_zeros;
  if (name == "bxor") return Input::random_bits;
  if (name == "land") return Input::mostly_true;
  if (name == "lor") return Input::mostly_false;
  if (name == "affine") return Input::affine;
  return Input::small_ints;  // user operators: small integers are exact for sums and products alike
}

// Scalar k of a rank's input, from the hash h of k (and a second, independent
// hash g for the upper half of 64-bit values). The kind is a template
// parameter so that the fill loop is branch-free and vectorises.
template <Input kind, class T>
T input_value(std::uint32_t h, std::uint32_t g, std::uint64_t k) {
  constexpr bool integral = std::is_integral_v<T>;
  constexpr bool is_signed = std::is_signed_v<T>;
  const std::uint64_t wide = (static_cast<std::uint64_t>(g) << 32) | h;
  if constexpr (kind == Input::small_ints) {
    // [-3, 3] (unsigned: [0, 6]): float partial sums stay exact (below 2^24)
    // for millions of ranks; integer sums wrap, which is exact too.
    if constexpr (is_signed)
      return static_cast<T>(static_cast<int>(h % 7U) - 3);
    else
      return static_cast<T>(h % 7U);
  } else if constexpr (kind == Input::plus_minus_one) {
    if constexpr (is_signed)
      return static_cast<T>((h & 7U) == 0 ? -1 : 1);
    else
      return static_cast<T>((h & 7U) == 0 ? 3 : 1);  // odd: the wrapped product never dies out
  } else if constexpr (kind == Input::any || kind == Input::random_bits) {
    if constexpr (integral)
      return static_cast<T>(wide);
    else
      return static_cast<T>(static_cast<int>(h % 2000001U) - 1000000) / T(4);
  } else if constexpr (kind == Input::mostly_ones || kind == Input::mostly_zeros) {
    if constexpr (integral) {
      using U = std::make_unsigned_t<T>;
      const U bit = static_cast<U>(U(1) << ((h >> 8) % (8 * sizeof(T))));
      const U v = (h & 3U) == 0 ? bit : U(0);
      return static_cast<T>(kind == Input::mostly_zeros ? v : static_cast<U>(~v));
    } else {
      return T(0);
    }
  } else if constexpr (kind == Input::mostly_true) {
    return static_cast<T>((h & 15U) == 0 ? 0U : 1U + ((h >> 4) & 1U));
  } else if constexpr (kind == Input::mostly_false) {
    return static_cast<T>((h & 15U) != 0 ? 0U : 1U + ((h >> 4) & 1U));
  } else {
    static_assert(kind == Input::affine);
    // Even scalars are multipliers a (odd, so products never vanish), odd ones
    // offsets b. Written without a branch, so that the loop vectorises.
    if constexpr (integral)
      return static_cast<T>(wide | (~k & 1U));
    else
      return T(0);
  }
}

template <Input kind, class T>
void fill_scalars(std::uint32_t seed, std::uint64_t n, T* __restrict out) {
  constexpr bool needs_g = sizeof(T) > 4 && std::is_integral_v<T> &&
                           (kind == Input::any || kind == Input::random_bits || kind == Input::affine);
  // Chunks of 2^32 scalars, each with its own seed, so the index fits 32 bits.
  for (std::uint64_t base = 0; base < n; base += (std::uint64_t{1} << 32)) {
    const std::uint64_t len = std::min<std::uint64_t>(n - base, std::uint64_t{1} << 32);
    const std::uint32_t s1 = mix32(seed ^ mix32(static_cast<std::uint32_t>(base >> 32) + 0x51ed27U));
    const std::uint32_t s2 = mix32(s1 + 0x632be5abU);
    T* __restrict o = out + base;
    // Tiles of 256: the hashes first, in loops of 32-bit lanes alone, then
    // the values from them. In one loop, the mix of 32-bit hashes and 64-bit
    // values kept most kinds from vectorising (the fill was then nearly half
    // of an emulated allreduce's CPU time); the values are the same.
    constexpr std::uint32_t kTile = 256;
    std::uint32_t h[kTile], g[kTile];
    for (std::uint64_t first = 0; first < len; first += kTile) {
      const auto tile = static_cast<std::uint32_t>(std::min<std::uint64_t>(kTile, len - first));
      const auto k0 = static_cast<std::uint32_t>(first);
      hash_indices(k0, tile, 0x9E3779B1U, s1, h);
      if constexpr (needs_g) hash_indices(k0, tile, 0x85EBCA77U, s2, g);
      for (std::uint32_t j = 0; j < tile; ++j)
        o[first + j] = input_value<kind, T>(h[j], needs_g ? g[j] : 0U, first + j);
    }
  }
}

template <class T>
void fill_scalars(Input kind, std::uint32_t seed, std::uint64_t n, T* out) {
  switch (kind) {
    case Input::small_ints: return fill_scalars<Input::small_ints>(seed, n, out);
    case Input::plus_minus_one: return fill_scalars<Input::plus_minus_one>(seed, n, out);
    case Input::any: return fill_scalars<Input::any>(seed, n, out);
    case Input::mostly_ones: return fill_scalars<Input::mostly_ones>(seed, n, out);
    case Input::mostly_zeros: return fill_scalars<Input::mostly_zeros>(seed, n, out);
    case Input::random_bits: return fill_scalars<Input::random_bits>(seed, n, out);
    case Input::mostly_true: return fill_scalars<Input::mostly_true>(seed, n, out);
    case Input::mostly_false: return fill_scalars<Input::mostly_false>(seed, n, out);
    case Input::affine: return fill_scalars<Input::affine>(seed, n, out);
  }
}

}  // namespace

std::string_view to_string(DType t) {
  switch (t) {
    case DType::int8: return "int8";
    case DType::int16: return "int16";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::uint16: return "uint16";
    case DType::uint32: return "uint32";
    case DType::uint64: return "uint64";
    case DType::float32: return "float";
    case DType::float64: return "double";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : kDTypes)
    if (to_string(t) == name) return t;
  if (name == "float32") return DType::float32;
  if (name == "float64") return DType::float64;
  throw UsageError("unknown datatype '" + std::string(name) + "' (known: " + join(kDTypes, ", ") + ")");
}

std::size_t dtype_size(DType t) {
  return with_dtype(t, [](auto v) { return sizeof(v); });
}

std::span<const DType> all_dtypes() { return kDTypes; }

std::span<const std::string_view> builtin_op_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (BuiltinOp op : all_builtin_ops()) out.push_back(to_string(op));
    return out;
  }();
  return names;
}

ReduceOp builtin_op(std::string_view name, DType dtype) {
  for (BuiltinOp kind : all_builtin_ops()) {
    if (to_string(kind) != name) continue;
    const CombineKernel kernel = combine_kernel(kind, dtype);
    if (!kernel)
      throw UsageError("operator '" + std::string(name) + "' is not defined on " + std::string(to_string(dtype)));
    ReduceOp op;
    op.name = std::string(name);
    op.dtype = dtype;
    op.commutative = commutes(kind);
    op.element_bytes = (pairs(kind) ? 2 : 1) * dtype_size(dtype);
    op.combine = kernel;
    op.identity = kernel_identity(kernel);
    return op;
  }
  throw UsageError("unknown operator '" + std::string(name) + "' (known: " + join(builtin_op_names(), ", ") + ")");
}

ReduceOp user_op(std::string name, DType dtype, bool commutative, std::size_t element_bytes,
                 std::function<void(const void* a, void* b, std::size_t n)> a_op_b_into_b) {
  if (!a_op_b_into_b) throw UsageError("user operator '" + name + "' has no function");
  if (element_bytes == 0) throw UsageError("user operator '" + name + "' needs a non-zero element size");
  ReduceOp op;
  op.name = std::move(name);
  op.dtype = dtype;
  op.commutative = commutative;
  op.element_bytes = element_bytes;
  auto fn = std::make_shared<const std::function<void(const void*, void*, std::size_t)>>(std::move(a_op_b_into_b));
  op.identity = fn;
  op.combine = [fn = std::move(fn), commutative, element_bytes](void* inout, const void* in, std::size_t n,
                                                                Combine side) {
    if (n == 0) return;
    const std::size_t bytes = n * element_bytes;
    if (side == Combine::replace) {
      std::memcpy(inout, in, bytes);
    } else if (side == Combine::left || commutative) {
      (*fn)(in, inout, n);  // inout = in ⊙ inout
    } else {
      // inout = inout ⊙ in: the user's function writes into its second
      // argument, so compute into a copy of `in`, a chunk at a time on the
      // stack: no call allocates, whichever thread combines how much. Only
      // an element wider than the chunk goes through a per-thread buffer,
      // which grows to the widest such call.
      constexpr std::size_t kChunkBytes = 4096;
      alignas(64) std::byte chunk[kChunkBytes];
      const std::size_t per = std::max<std::size_t>(1, kChunkBytes / element_bytes);
      std::byte* copy = chunk;
      if (element_bytes > kChunkBytes) {
        thread_local std::vector<std::byte> wide;
        if (wide.size() < element_bytes) wide.resize(element_bytes);
        copy = wide.data();
      }
      auto* out = static_cast<std::byte*>(inout);
      const auto* from = static_cast<const std::byte*>(in);
      for (std::size_t at = 0; at < n; at += per) {
        const std::size_t k = std::min(per, n - at), chunk_bytes = k * element_bytes;
        std::memcpy(copy, from + at * element_bytes, chunk_bytes);
        (*fn)(out + at * element_bytes, copy, k);
        std::memcpy(out + at * element_bytes, copy, chunk_bytes);
      }
    }
  };
  return op;
}

void fill_input(const ReduceOp& op, int rank, std::uint64_t count, void* out) {
  if (count == 0) return;
  const std::size_t scalar = dtype_size(op.dtype);
  const std::uint64_t bytes = count * op.element_bytes;
  const std::uint64_t scalars = bytes / scalar;
  const Input kind = input_kind(op.name);
  const std::uint32_t seed = mix32(static_cast<std::uint32_t>(rank) * 0x9E3779B9U + 0x2545F491U);
  with_dtype(op.dtype, [&](auto t) {
    using T = decltype(t);
    fill_scalars<T>(kind, seed, scalars, static_cast<T*>(out));
  });
  // Element sizes that are not a multiple of the scalar size: hash the tail bytes.
  auto* tail = static_cast<std::byte*>(out) + scalars * scalar;
  for (std::uint64_t i = scalars * scalar; i < bytes; ++i)
    *tail++ = static_cast<std::byte>(mix32(seed ^ static_cast<std::uint32_t>(i)) & 7U);
}

std::vector<std::byte> reference_result(const ReduceOp& op, int ranks, std::uint64_t count) {
  if (ranks < 1) throw UsageError("reference_result: at least one rank is needed");
  const std::size_t bytes = static_cast<std::size_t>(count * op.element_bytes);
  std::vector<std::byte> acc(bytes), x(bytes);
  fill_input(op, 0, count, acc.data());
  for (int r = 1; r < ranks; ++r) {
    fill_input(op, r, count, x.data());
    op.combine(acc.data(), x.data(), static_cast<std::size_t>(count), Combine::right);
  }
  return acc;
}

}  // namespace copse
