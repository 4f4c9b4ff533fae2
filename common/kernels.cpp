#include "common/kernels.hpp"

#include <array>
#include <cstring>
#include <type_traits>

// One clone per x86-64 level; the loader picks the best the CPU supports.
// Not under ThreadSanitizer: the clones' ifunc resolvers run while the
// program is being loaded, before the TSan runtime is up, and its
// instrumentation of them crashes at start-up.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define COPSE_KERNEL [[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]]
#else
#define COPSE_KERNEL
#endif

namespace copse {

namespace {

// Integer arithmetic is done in an unsigned type at least as wide as
// `unsigned`, so it wraps instead of overflowing (and never promotes to int).
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
constexpr T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
  else
    return a + b;
}
template <class T>
constexpr T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
  else
    return a * b;
}

// The element operators: apply(a, b) = a ⊙ b.
struct Sum {
  template <class T>
  static T apply(T a, T b) {
    return wrap_add(a, b);
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    return wrap_mul(a, b);
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};
struct BAnd {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};
struct BOr {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};
struct BXor {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};
struct LAnd {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>((a != T(0)) & (b != T(0)));
  }
};
struct LOr {
  template <class T>
  static T apply(T a, T b) {
    return static_cast<T>((a != T(0)) | (b != T(0)));
  }
};

// Whole-array kernels: one indirect call per combine, a tight loop the
// compiler vectorises inside. The operators above are commutative, so the
// side only matters for `replace`.
template <class Op, class T>
COPSE_KERNEL void elementwise_kernel(void* inout, const void* in, std::size_t n, Combine side) {
  if (n == 0) return;
  if (side == Combine::replace) {
    std::memcpy(inout, in, n * sizeof(T));
    return;
  }
  T* __restrict io = static_cast<T*>(inout);
  const T* __restrict x = static_cast<const T*>(in);
  for (std::size_t i = 0; i < n; ++i) io[i] = Op::template apply<T>(io[i], x[i]);
}

// Affine maps x -> a*x + b as pairs (a, b); (a1,b1) ⊙ (a2,b2) = (a1*a2, a2*b1 + b2).
template <class T>
COPSE_KERNEL void affine_kernel(void* inout, const void* in, std::size_t n, Combine side) {
  if (n == 0) return;
  if (side == Combine::replace) {
    std::memcpy(inout, in, 2 * n * sizeof(T));
    return;
  }
  using W = Wide<T>;
  T* __restrict io = static_cast<T*>(inout);
  const T* __restrict x = static_cast<const T*>(in);
  if (side == Combine::left) {  // io = x ⊙ io
    for (std::size_t i = 0; i < n; ++i) {
      const W a1 = static_cast<W>(x[2 * i]), b1 = static_cast<W>(x[2 * i + 1]);
      const W a2 = static_cast<W>(io[2 * i]), b2 = static_cast<W>(io[2 * i + 1]);
      io[2 * i] = static_cast<T>(a1 * a2);
      io[2 * i + 1] = static_cast<T>(a2 * b1 + b2);
    }
  } else {  // io = io ⊙ x
    for (std::size_t i = 0; i < n; ++i) {
      const W a1 = static_cast<W>(io[2 * i]), b1 = static_cast<W>(io[2 * i + 1]);
      const W a2 = static_cast<W>(x[2 * i]), b2 = static_cast<W>(x[2 * i + 1]);
      io[2 * i] = static_cast<T>(a1 * a2);
      io[2 * i + 1] = static_cast<T>(a2 * b1 + b2);
    }
  }
}

template <class Op>
CombineKernel for_type(DType dtype) {
  return with_dtype(dtype, [](auto t) -> CombineKernel { return &elementwise_kernel<Op, decltype(t)>; });
}

template <class Op>
CombineKernel for_integer_type(DType dtype) {
  return with_dtype(dtype, [](auto t) -> CombineKernel {
    if constexpr (std::is_integral_v<decltype(t)>)
      return &elementwise_kernel<Op, decltype(t)>;
    else
      return nullptr;
  });
}

constexpr std::array kBuiltinOps = {BuiltinOp::sum,  BuiltinOp::prod,  BuiltinOp::min,  BuiltinOp::max,
                                    BuiltinOp::band, BuiltinOp::bor,   BuiltinOp::bxor, BuiltinOp::land,
                                    BuiltinOp::lor,  BuiltinOp::affine};

}  // namespace

std::span<const BuiltinOp> all_builtin_ops() { return kBuiltinOps; }

std::string_view to_string(BuiltinOp op) {
  switch (op) {
    case BuiltinOp::sum: return "sum";
    case BuiltinOp::prod: return "prod";
    case BuiltinOp::min: return "min";
    case BuiltinOp::max: return "max";
    case BuiltinOp::band: return "band";
    case BuiltinOp::bor: return "bor";
    case BuiltinOp::bxor: return "bxor";
    case BuiltinOp::land: return "land";
    case BuiltinOp::lor: return "lor";
    case BuiltinOp::affine: return "affine";
  }
  return "?";
}

CombineKernel combine_kernel(BuiltinOp op, DType dtype) {
  switch (op) {
    case BuiltinOp::sum: return for_type<Sum>(dtype);
    case BuiltinOp::prod: return for_type<Prod>(dtype);
    case BuiltinOp::min: return for_type<Min>(dtype);
    case BuiltinOp::max: return for_type<Max>(dtype);
    case BuiltinOp::land: return for_type<LAnd>(dtype);
    case BuiltinOp::lor: return for_type<LOr>(dtype);
    case BuiltinOp::band: return for_integer_type<BAnd>(dtype);
    case BuiltinOp::bor: return for_integer_type<BOr>(dtype);
    case BuiltinOp::bxor: return for_integer_type<BXor>(dtype);
    case BuiltinOp::affine:
      return with_dtype(dtype, [](auto t) -> CombineKernel {
        if constexpr (std::is_integral_v<decltype(t)>)
          return &affine_kernel<decltype(t)>;
        else
          return nullptr;
      });
  }
  return nullptr;
}

COPSE_KERNEL void hash_indices(std::uint32_t k0, std::uint32_t n, std::uint32_t multiplier, std::uint32_t seed,
                               std::uint32_t* __restrict out) {
  for (std::uint32_t j = 0; j < n; ++j) out[j] = mix32(((k0 + j) * multiplier) ^ seed);
}

}  // namespace copse
