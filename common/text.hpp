#pragma once
// Small pieces of text and arithmetic that every layer needs once.

#include <algorithm>
#include <concepts>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace copse {

// "a, b, c": the items written one after another with `separator` between.
// An item is text (anything a std::string_view is made from), a number, or a
// value with a to_string overload found by argument-dependent lookup (copse's
// enums: join(all_collectives(), ", ")).
template <std::ranges::input_range Items>
std::string join(const Items& items, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    first = false;
    using Item = std::remove_cvref_t<decltype(item)>;
    if constexpr (std::is_convertible_v<const Item&, std::string_view>)
      out += std::string_view(item);
    else if constexpr (std::is_arithmetic_v<Item>)
      out += std::to_string(item);
    else
      out += to_string(item);
  }
  return out;
}

// join's inverse: the pieces of `text` between the `separator`s, empty
// pieces kept ("a,,b" -> a, "", b; "" -> one empty piece).
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(separator, at);
    out.emplace_back(text.substr(at, end == std::string_view::npos ? text.npos : end - at));
    if (end == std::string_view::npos) return out;
    at = end + 1;
  }
}

// n rounded up to a multiple of `to` (> 0): round_up(100, 64) == 128.
template <std::unsigned_integral T>
constexpr T round_up(T n, std::type_identity_t<T> to) {
  return (n + to - 1) / to * to;
}

// The median of `sorted` (ascending): its middle value, or the mean of its
// two middle ones; 0 when empty. median_of_sorted({1, 2, 4, 8}) == 3.
inline double median_of_sorted(std::span<const double> sorted) {
  const std::size_t n = sorted.size();
  if (n == 0) return 0;
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}
// The same of `values` in any order.
inline double median(std::vector<double> values) {
  std::ranges::sort(values);
  return median_of_sorted(values);
}

// `text` as a JSON string, quotes included: quotes and backslashes escaped,
// control characters as spaces (the texts are messages and names).
inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace copse
