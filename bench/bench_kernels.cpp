// Each built-in reduction kernel against the a += b bound, side by side in
// one run (issue 8, "kernels at memory speed in every build type").
//
// The bound is the simplest thing a reduction can be: 64-bit words added in
// place, a[i] += b[i], over the same bytes, compiled like the kernels (-O3,
// one clone per x86-64 level). A kernel at memory speed takes about as long
// (ratio near 1); a scalar or badly vectorised one takes several times longer.
// Two sizes: in cache (32 KiB per operand) and in memory (64 MiB). For each
// row the kernel and the bound are timed alternately, and the minimum over
// the repetitions is kept (the machine is shared: the fastest run is the one
// least disturbed).
//
// Usage: bench_kernels [--quick]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/kernels.hpp"
#include "common/reduce_op.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BOUND_CLONES [[gnu::target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")]]
#else
#define BOUND_CLONES
#endif

namespace {

#pragma GCC push_options
#pragma GCC optimize("O3")
BOUND_CLONES void add_words(std::uint64_t* __restrict a, const std::uint64_t* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}
#pragma GCC pop_options

double seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  if (argc > 1 && !quick) {
    std::fprintf(stderr, "usage: bench_kernels [--quick]\n");
    return 2;
  }
  using namespace copse;
  const int repetitions = quick ? 3 : 9;
  const std::size_t sizes[] = {std::size_t{32} << 10, std::size_t{64} << 20};
  std::printf("%-8s %-7s %-6s %12s %12s %8s\n", "OP", "TYPE", "SIZE", "KERNEL GB/s", "BOUND GB/s", "RATIO");
  for (std::size_t bytes : sizes) {
    std::vector<std::uint64_t> a(bytes / 8), b(bytes / 8);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = i * 0x9E3779B97F4A7C15ULL, b[i] = ~a[i];
    // Many passes over a cached operand, one over a large one.
    const int passes = bytes < (std::size_t{1} << 20) ? 2000 : 1;
    for (BuiltinOp kind : all_builtin_ops())
      for (DType dtype : all_dtypes()) {
        if (!combine_kernel(kind, dtype)) continue;
        const ReduceOp op = builtin_op(to_string(kind), dtype);
        const std::size_t n = bytes / op.element_bytes;
        // Operands that stay finite and non-trivial for every type: small values.
        fill_input(op, 0, n, a.data());
        fill_input(op, 1, n, b.data());
        double kernel = 1e30, bound = 1e30;
        for (int rep = 0; rep < repetitions; ++rep) {
          auto t0 = std::chrono::steady_clock::now();
          for (int p = 0; p < passes; ++p) op.combine(a.data(), b.data(), n, Combine::left);
          kernel = std::min(kernel, seconds(t0));
          t0 = std::chrono::steady_clock::now();
          for (int p = 0; p < passes; ++p) add_words(a.data(), b.data(), a.size());
          bound = std::min(bound, seconds(t0));
        }
        // Bytes touched per pass: read both operands, write one.
        const double touched = 3.0 * static_cast<double>(bytes) * passes;
        std::printf("%-8s %-7s %-6s %12.1f %12.1f %8.2f\n", std::string(to_string(kind)).c_str(),
                    std::string(to_string(dtype)).c_str(), bytes < (std::size_t{1} << 20) ? "32KiB" : "64MiB",
                    touched / kernel * 1e-9, touched / bound * 1e-9, kernel / bound);
      }
  }
  return 0;
}
