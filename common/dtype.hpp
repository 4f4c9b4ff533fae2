#pragma once
// The element types copse reduces, and the one place that turns a run-time
// DType into its C++ type.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace copse {

enum class DType { int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64 };

std::string_view to_string(DType t);       // "int32", "float", "double", ...
DType parse_dtype(std::string_view name);  // also "float32", "float64"; throws UsageError
std::size_t dtype_size(DType t);
std::span<const DType> all_dtypes();
inline bool is_floating(DType t) { return t == DType::float32 || t == DType::float64; }

// Calls f(T{}) with T the C++ type of `t` and returns what it returns:
//   with_dtype(t, [](auto v) { return sizeof(v); })
template <class F>
decltype(auto) with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::int8: return f(std::int8_t{});
    case DType::int16: return f(std::int16_t{});
    case DType::int32: return f(std::int32_t{});
    case DType::int64: return f(std::int64_t{});
    case DType::uint8: return f(std::uint8_t{});
    case DType::uint16: return f(std::uint16_t{});
    case DType::uint32: return f(std::uint32_t{});
    case DType::uint64: return f(std::uint64_t{});
    case DType::float32: return f(float{});
    case DType::float64: break;
  }
  return f(double{});
}

}  // namespace copse
