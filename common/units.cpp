#include "common/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <system_error>
#include <utility>

#include "common/error.hpp"

namespace copse {
namespace {

__extension__ typedef unsigned __int128 u128;

constexpr std::string_view kSizeUnits = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
constexpr std::string_view kTimeUnits = "s, ms, us, ns, ps";

// A decimal number as written: digits, an optional fraction, an optional
// exponent, split from whatever follows it (the unit).
struct Decimal {
  std::string_view integral;  // digits before the point
  std::string_view fraction;  // digits after the point
  long exponent = 0;          // decimal exponent as written, clamped to +-100000
  std::string_view unit;      // the rest of the text
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string in_double_quotes(std::string_view text) {
  std::string out = "\"";
  out += text;
  out += '"';
  return out;
}

[[noreturn]] void fail(std::string_view what, std::string_view text, std::string_view why) {
  throw UsageError("invalid " + std::string(what) + " " + in_double_quotes(text) + ": " + std::string(why));
}

Decimal split_decimal(std::string_view what, std::string_view text, std::string_view units) {
  if (text.empty()) fail(what, text, "empty");
  if (text.front() == '-') fail(what, text, "must not be negative");
  Decimal d;
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  d.integral = text.substr(0, i);
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
    d.fraction = text.substr(start, i - start);
  }
  if (d.integral.empty() && d.fraction.empty())
    fail(what, text, "expected a number, optionally followed by a unit (" + std::string(units) + ")");
  // An exponent needs at least one digit; otherwise the 'e' is left to the unit.
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    bool negative = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) negative = text[j++] == '-';
    if (j < text.size() && is_digit(text[j])) {
      long e = 0;
      while (j < text.size() && is_digit(text[j])) {
        if (e < 100000) e = e * 10 + (text[j] - '0');
        ++j;
      }
      d.exponent = negative ? -e : e;
      i = j;
    }
  }
  d.unit = text.substr(i);
  return d;
}

template <class T, std::size_t N>
const T* find_unit(const std::array<std::pair<std::string_view, T>, N>& table, std::string_view unit) {
  for (const auto& [name, value] : table)
    if (name == unit) return &value;
  return nullptr;
}

}  // namespace

std::uint64_t parse_size(std::string_view text) {
  constexpr std::string_view what = "size";
  const Decimal d = split_decimal(what, text, kSizeUnits);

  // Multiplier of each unit (all fit in 2^40 or 10^12).
  static constexpr std::array<std::pair<std::string_view, std::uint64_t>, 11> units{{
      {"", 1},
      {"B", 1},
      {"KB", 1000ULL},
      {"kB", 1000ULL},
      {"MB", 1000ULL * 1000},
      {"GB", 1000ULL * 1000 * 1000},
      {"TB", 1000ULL * 1000 * 1000 * 1000},
      {"KiB", 1ULL << 10},
      {"MiB", 1ULL << 20},
      {"GiB", 1ULL << 30},
      {"TiB", 1ULL << 40},
  }};
  const std::uint64_t* multiplier = find_unit(units, d.unit);
  if (!multiplier)
    fail(what, text, "unknown unit " + in_double_quotes(d.unit) + " (expected " + std::string(kSizeUnits) + ")");

  // Exact arithmetic: value = mantissa * 10^exponent * multiplier, with the
  // mantissa the significant digits and the fraction folded into the exponent.
  std::string digits(d.integral);
  digits += d.fraction;
  long exponent = d.exponent - static_cast<long>(d.fraction.size());
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return 0;
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (digits.size() > 26) fail(what, text, "too many significant digits");

  constexpr u128 max64 = std::numeric_limits<std::uint64_t>::max();
  const auto too_large = [&]() { fail(what, text, "too large (the limit is 2^64-1 bytes)"); };
  u128 value = 0;
  for (char c : digits) value = value * 10 + static_cast<unsigned>(c - '0');
  value *= *multiplier;  // < 10^26 * 2^40 < 2^127
  if (exponent >= 0) {
    for (long e = 0; e < exponent; ++e) {
      if (value > max64) too_large();
      value *= 10;
    }
  } else {
    // value < 2^127 < 10^39, so dividing by 10^39 or more leaves a fraction.
    if (-exponent > 38) fail(what, text, "not a whole number of bytes");
    u128 divisor = 1;
    for (long e = 0; e < -exponent; ++e) divisor *= 10;
    if (value % divisor != 0) fail(what, text, "not a whole number of bytes");
    value /= divisor;
  }
  if (value > max64) too_large();
  return static_cast<std::uint64_t>(value);
}

double parse_time(std::string_view text) {
  constexpr std::string_view what = "time";
  const Decimal d = split_decimal(what, text, kTimeUnits);

  static constexpr std::array<std::pair<std::string_view, long>, 8> units{{
      {"", 0},
      {"s", 0},
      {"ms", -3},
      {"us", -6},
      {"\xC2\xB5s", -6},  // U+00B5 MICRO SIGN
      {"\xCE\xBCs", -6},  // U+03BC GREEK SMALL LETTER MU
      {"ns", -9},
      {"ps", -12},
  }};
  const long* unit_exponent = find_unit(units, d.unit);
  if (!unit_exponent)
    fail(what, text, "unknown unit " + in_double_quotes(d.unit) + " (expected " + std::string(kTimeUnits) + ")");

  // Rewrite as one decimal literal so the result is rounded once: "0.1ns" is
  // exactly the double nearest 1e-10.
  std::string literal(d.integral.empty() ? "0" : d.integral);
  if (!d.fraction.empty()) {
    literal += '.';
    literal += d.fraction;
  }
  literal += 'e';
  literal += std::to_string(d.exponent + *unit_exponent);

  double value = 0;
  const auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), value);
  if (ec != std::errc{} || end != literal.data() + literal.size()) {
    if (ec == std::errc::result_out_of_range) fail(what, text, "out of range");
    fail(what, text, "not a number");
  }
  if (!std::isfinite(value)) fail(what, text, "out of range");
  return value;
}

std::string format_time(double seconds) {
  if (std::isnan(seconds)) return "nan";
  if (std::isinf(seconds)) return seconds > 0 ? "inf" : "-inf";
  if (seconds == 0) return "0 s";
  if (seconds < 0) {
    std::string out(1, '-');  // not "-" + string: g++ 12 -O3 warns falsely (-Wrestrict)
    out += format_time(-seconds);
    return out;
  }

  static constexpr std::array<std::pair<const char*, double>, 5> units{
      {{"s", 1.0}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}, {"ps", 1e-12}}};
  std::size_t u = 0;
  while (u + 1 < units.size() && seconds < units[u].second) ++u;
  char buffer[64];
  for (;;) {
    const double v = seconds / units[u].second;
    std::snprintf(buffer, sizeof buffer, "%.3g", v);
    if (std::strtod(buffer, nullptr) >= 1000) {
      // Rounding carried into the next unit (999.7 us is "1 ms"), or the
      // value is 1000 s or more: print whole seconds without an exponent.
      if (u > 0) {
        --u;
        continue;
      }
      std::snprintf(buffer, sizeof buffer, "%.0f", v);
    }
    return std::string(buffer) + " " + units[u].first;
  }
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 7> units{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  std::size_t u = 0;
  std::uint64_t scale = 1;
  while (u + 1 < units.size() && bytes / scale >= 1024) {
    scale <<= 10;
    ++u;
  }
  if (bytes % scale == 0) return std::to_string(bytes / scale) + " " + units[u];
  char buffer[64];
  for (;;) {
    const double v = static_cast<double>(bytes) / static_cast<double>(scale);
    std::snprintf(buffer, sizeof buffer, v < 1000 ? "%.3g" : "%.0f", v);
    if (std::strtod(buffer, nullptr) >= 1024 && u + 1 < units.size()) {
      scale <<= 10;
      ++u;
      continue;
    }
    return std::string(buffer) + " " + units[u];
  }
}

}  // namespace copse
