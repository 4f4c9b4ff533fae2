// Datatypes and reduction operators: every valid (operator, datatype) pair
// against a naive scalar implementation written independently here, the
// order semantics of Combine::left/right, and the reference result.

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "common/reduce_op.hpp"

using namespace copse;

namespace {

bool defined(std::string_view op, DType t) {
  if (op == "band" || op == "bor" || op == "bxor" || op == "affine") return !is_floating(t);
  return true;
}

// a ⊙ b for one scalar, the obvious way: wrap-around through uint64 for integers.
template <class T>
T naive(std::string_view op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    if (op == "sum") return static_cast<T>(ua + ub);
    if (op == "prod") return static_cast<T>(ua * ub);
    if (op == "band") return static_cast<T>(ua & ub);
    if (op == "bor") return static_cast<T>(ua | ub);
    if (op == "bxor") return static_cast<T>(ua ^ ub);
  } else {
    if (op == "sum") return a + b;
    if (op == "prod") return a * b;
  }
  if (op == "min") return a < b ? a : b;
  if (op == "max") return a < b ? b : a;
  if (op == "land") return (a != 0 && b != 0) ? T(1) : T(0);
  if (op == "lor") return (a != 0 || b != 0) ? T(1) : T(0);
  throw std::logic_error("naive: unknown op");
}

// (a1,b1) ⊙ (a2,b2): x -> a1*x+b1, then x -> a2*x+b2.
template <class T>
void naive_affine(const T* first, const T* second, T* out) {
  const auto a1 = static_cast<std::uint64_t>(first[0]), b1 = static_cast<std::uint64_t>(first[1]);
  const auto a2 = static_cast<std::uint64_t>(second[0]), b2 = static_cast<std::uint64_t>(second[1]);
  out[0] = static_cast<T>(a1 * a2);
  out[1] = static_cast<T>(a2 * b1 + b2);
}

// Naive a ⊙ b for whole elements of `op` (scalars or affine pairs).
template <class T>
void naive_element(std::string_view op, const T* a, const T* b, T* out) {
  if (op == "affine")
    naive_affine(a, b, out);
  else
    out[0] = naive(op, a[0], b[0]);
}

template <class T>
std::vector<T> random_scalars(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (auto& x : v) {
    const std::uint64_t r = rng();
    if constexpr (std::is_integral_v<T>) {
      // Mix small values (zeros for the logical ops) with arbitrary bit patterns.
      x = (r & 3) == 0 ? static_cast<T>(r % 3) : static_cast<T>(r >> 8);
    } else {
      x = static_cast<T>(static_cast<std::int64_t>(r % 2001) - 1000) / T(8);
    }
  }
  return v;
}

}  // namespace

TEST_CASE("datatypes parse, print and have their sizes", "[reduce_op]") {
  CHECK(all_dtypes().size() == 10);
  for (DType t : all_dtypes()) CHECK(parse_dtype(to_string(t)) == t);
  CHECK(to_string(DType::float32) == "float");
  CHECK(to_string(DType::float64) == "double");
  CHECK(parse_dtype("float32") == DType::float32);
  CHECK(parse_dtype("float64") == DType::float64);
  CHECK(parse_dtype("uint16") == DType::uint16);
  CHECK(dtype_size(DType::int8) == 1);
  CHECK(dtype_size(DType::uint16) == 2);
  CHECK(dtype_size(DType::int32) == 4);
  CHECK(dtype_size(DType::float32) == 4);
  CHECK(dtype_size(DType::uint64) == 8);
  CHECK(dtype_size(DType::float64) == 8);
  CHECK_THROWS_AS(parse_dtype("int128"), UsageError);
  CHECK_THROWS_WITH(parse_dtype("quad"), Catch::Contains("unknown datatype 'quad'") && Catch::Contains("int32"));
}

TEST_CASE("operators undefined on a datatype, and unknown ones, are refused", "[reduce_op]") {
  CHECK(builtin_op_names().size() == 10);
  for (auto name : builtin_op_names())
    for (DType t : all_dtypes()) {
      if (defined(name, t))
        CHECK_NOTHROW(builtin_op(name, t));
      else
        CHECK_THROWS_AS(builtin_op(name, t), UsageError);
    }
  CHECK_THROWS_WITH(builtin_op("band", DType::float32), "operator 'band' is not defined on float");
  CHECK_THROWS_WITH(builtin_op("affine", DType::float64), "operator 'affine' is not defined on double");
  CHECK_THROWS_WITH(builtin_op("avg", DType::int32), Catch::Contains("unknown operator 'avg'"));
}

TEST_CASE("every valid operator and datatype matches a naive scalar loop, left and right", "[reduce_op]") {
  std::mt19937_64 rng(42);
  for (auto name : builtin_op_names())
    for (DType t : all_dtypes()) {
      if (!defined(name, t)) continue;
      with_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        const ReduceOp op = builtin_op(name, t);
        INFO("op " << name << " on " << to_string(t));
        const std::size_t per = name == "affine" ? 2 : 1;
        CHECK(op.name == name);
        CHECK(op.dtype == t);
        CHECK(op.element_bytes == per * sizeof(T));
        CHECK(op.commutative == (name != "affine"));
        for (std::size_t n : {0, 1, 3, 17, 1000}) {
          const auto held = random_scalars<T>(n * per, rng);
          const auto received = random_scalars<T>(n * per, rng);
          auto left = held, right = held, replaced = held;
          op.combine(left.data(), received.data(), n, Combine::left);
          op.combine(right.data(), received.data(), n, Combine::right);
          op.combine(replaced.data(), received.data(), n, Combine::replace);
          std::vector<T> want_left(n * per), want_right(n * per);
          for (std::size_t i = 0; i < n; ++i) {
            naive_element<T>(name, &received[i * per], &held[i * per], &want_left[i * per]);
            naive_element<T>(name, &held[i * per], &received[i * per], &want_right[i * per]);
          }
          CHECK(left == want_left);
          CHECK(right == want_right);
          CHECK(replaced == received);
        }
      });
    }
}

TEST_CASE("affine is associative, not commutative, and composes maps in order", "[reduce_op]") {
  std::mt19937_64 rng(7);
  for (DType t : {DType::int8, DType::uint16, DType::int32, DType::uint64}) {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        const ReduceOp op = builtin_op("affine", t);
        const std::size_t n = 64;
        const auto f = random_scalars<T>(2 * n, rng), g = random_scalars<T>(2 * n, rng),
                   h = random_scalars<T>(2 * n, rng);
        // left: inout = in ⊙ inout, right: inout = inout ⊙ in.
        auto fg_left = g;
        op.combine(fg_left.data(), f.data(), n, Combine::left);  // f ⊙ g
        auto fg_right = f;
        op.combine(fg_right.data(), g.data(), n, Combine::right);  // f ⊙ g
        CHECK(fg_left == fg_right);
        auto gf = g;
        op.combine(gf.data(), f.data(), n, Combine::right);  // g ⊙ f
        CHECK(gf != fg_left);
        // (f ⊙ g) ⊙ h == f ⊙ (g ⊙ h)
        auto fg_h = fg_left;
        op.combine(fg_h.data(), h.data(), n, Combine::right);
        auto g_h = g;
        op.combine(g_h.data(), h.data(), n, Combine::right);
        auto f_gh = g_h;
        op.combine(f_gh.data(), f.data(), n, Combine::left);
        CHECK(fg_h == f_gh);
        // Applying f ⊙ g to x is applying f, then g (mod 2^bits).
        for (std::size_t i = 0; i < n; ++i) {
          const U x = static_cast<U>(rng());
          auto apply = [](const T* m, U v) { return static_cast<U>(static_cast<U>(m[0]) * v + static_cast<U>(m[1])); };
          CHECK(apply(&fg_left[2 * i], x) == apply(&g[2 * i], apply(&f[2 * i], x)));
        }
      }
    });
  }
}

TEST_CASE("fill_input is deterministic per rank and element, and fits its operator", "[reduce_op]") {
  for (auto name : builtin_op_names())
    for (DType t : all_dtypes()) {
      if (!defined(name, t)) continue;
      const ReduceOp op = builtin_op(name, t);
      const std::uint64_t n = 257;
      std::vector<std::byte> a(n * op.element_bytes), b(a.size()), c(a.size());
      fill_input(op, 3, n, a.data());
      fill_input(op, 3, n, b.data());
      fill_input(op, 4, n, c.data());
      INFO("op " << name << " on " << to_string(t));
      CHECK(a == b);
      if (name != "band" && name != "bor" && name != "land" && name != "lor") CHECK(a != c);
      // A prefix of a longer fill is the shorter fill.
      std::vector<std::byte> shorter(10 * op.element_bytes);
      fill_input(op, 3, 10, shorter.data());
      CHECK(std::memcmp(shorter.data(), a.data(), shorter.size()) == 0);
    }
  const ReduceOp sum = builtin_op("sum", DType::int32);
  std::vector<std::int32_t> v(1000);
  fill_input(sum, 11, v.size(), v.data());
  for (auto x : v) CHECK((x >= -3 && x <= 3));
  const ReduceOp prod = builtin_op("prod", DType::float64);
  std::vector<double> d(1000);
  fill_input(prod, 2, d.size(), d.data());
  for (auto x : d) CHECK((x == 1.0 || x == -1.0));
  const ReduceOp affine = builtin_op("affine", DType::uint32);
  std::vector<std::uint32_t> m(2000);
  fill_input(affine, 5, 1000, m.data());
  for (std::size_t i = 0; i < m.size(); i += 2) CHECK((m[i] & 1U) == 1U);  // multipliers are odd
}

TEST_CASE("reference_result is the naive fold in rank order", "[reduce_op]") {
  for (auto name : builtin_op_names())
    for (DType t : all_dtypes()) {
      if (!defined(name, t)) continue;
      with_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        const ReduceOp op = builtin_op(name, t);
        const std::size_t per = op.element_bytes / sizeof(T);
        for (int p : {1, 2, 7, 64}) {
          const std::uint64_t n = 37;
          std::vector<T> acc(n * per), x(n * per), next(n * per);
          fill_input(op, 0, n, acc.data());
          for (int r = 1; r < p; ++r) {
            fill_input(op, r, n, x.data());
            for (std::size_t i = 0; i < n; ++i) naive_element<T>(name, &acc[i * per], &x[i * per], &next[i * per]);
            acc = next;
          }
          const auto ref = reference_result(op, p, n);
          REQUIRE(ref.size() == acc.size() * sizeof(T));
          INFO("op " << name << " on " << to_string(t) << ", p = " << p);
          CHECK(std::memcmp(ref.data(), acc.data(), ref.size()) == 0);
        }
      });
    }
  CHECK(reference_result(builtin_op("sum", DType::int32), 3, 0).empty());
  CHECK_THROWS_AS(reference_result(builtin_op("sum", DType::int32), 0, 4), UsageError);
}

TEST_CASE("float sums and products of the test input are exact for 4096 ranks", "[reduce_op]") {
  const int p = 4096;
  const std::uint64_t n = 16;
  const ReduceOp fsum = builtin_op("sum", DType::float32), isum = builtin_op("sum", DType::int64);
  const auto f = reference_result(fsum, p, n), i = reference_result(isum, p, n);
  std::vector<float> fv(n);
  std::vector<std::int64_t> iv(n);
  std::memcpy(fv.data(), f.data(), f.size());
  std::memcpy(iv.data(), i.data(), i.size());
  for (std::size_t k = 0; k < n; ++k) CHECK(static_cast<std::int64_t>(fv[k]) == iv[k]);
  // The same sum folded right to left (a different bracketing) is identical.
  std::vector<float> acc(n, 0.0f), x(n);
  for (int r = p - 1; r >= 0; --r) {
    fill_input(fsum, r, n, x.data());
    for (std::size_t k = 0; k < n; ++k) acc[k] = x[k] + acc[k];
  }
  CHECK(acc == fv);
}

TEST_CASE("user operators: left and right follow the header's convention", "[reduce_op]") {
  // A user-written affine on int32: b = a ⊙ b.
  auto affine = [](const void* a, void* b, std::size_t n) {
    const auto* x = static_cast<const std::uint32_t*>(a);
    auto* y = static_cast<std::uint32_t*>(b);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a1 = x[2 * i], b1 = x[2 * i + 1], a2 = y[2 * i], b2 = y[2 * i + 1];
      y[2 * i] = a1 * a2;
      y[2 * i + 1] = a2 * b1 + b2;
    }
  };
  const ReduceOp mine = user_op("my-affine", DType::uint32, false, 8, affine);
  const ReduceOp builtin = builtin_op("affine", DType::uint32);
  CHECK(mine.name == "my-affine");
  CHECK_FALSE(mine.commutative);
  CHECK(mine.element_bytes == 8);
  // The same maps as elements of 625 maps (5000 bytes, wider than the
  // chunk `right` copies through on the stack).
  const ReduceOp wide = user_op("wide-affine", DType::uint32, false, 5000,
                                [&](const void* a, void* b, std::size_t n) { affine(a, b, 625 * n); });
  std::mt19937_64 rng(3);
  // Counts about user_op's 4096-byte chunk of 512 of these elements.
  for (const std::size_t n : {0, 1, 50, 511, 512, 513, 1250, 1875, 2000}) {
    const auto held = random_scalars<std::uint32_t>(2 * n, rng), in = random_scalars<std::uint32_t>(2 * n, rng);
    for (Combine side : {Combine::left, Combine::right, Combine::replace}) {
      INFO(n << " elements, side " << static_cast<int>(side));
      auto a = held, b = held;
      mine.combine(a.data(), in.data(), n, side);
      builtin.combine(b.data(), in.data(), n, side);
      CHECK(a == b);
      if (n % 625 == 0) {
        auto w = held;
        wide.combine(w.data(), in.data(), n / 625, side);
        CHECK(w == b);
      }
    }
  }
  CHECK_THROWS_AS(user_op("nothing", DType::int32, true, 4, nullptr), UsageError);
  CHECK_THROWS_AS(user_op("zero", DType::int32, true, 0, affine), UsageError);
}
