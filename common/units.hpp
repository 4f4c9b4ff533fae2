#pragma once
// Sizes and times as users write them on the command line, and as humans read
// them back.
//
// SIZE: a non-negative number, optionally followed (without a space) by a unit.
//   Decimal units: B (1), KB/kB (1e3), MB (1e6), GB (1e9), TB (1e12).
//   Binary units:  KiB (2^10), MiB (2^20), GiB (2^30), TiB (2^40).
//   The number may have a fraction and a decimal exponent ("1.5MiB", "1e6"),
//   but the byte count it denotes must be a whole number that fits in 64 bits.
//   The arithmetic is exact (no floating point): "0.1KB" is 100 bytes.
//
// TIME: a non-negative finite number, optionally followed (without a space) by
//   a unit: s, ms, us (also µs), ns, ps. A bare number is in seconds
//   ("1e-6" is one microsecond).
//
// Both parsers throw copse::UsageError with a one-line message that quotes
// the offending text.

#include <cstdint>
#include <string>
#include <string_view>

namespace copse {

std::uint64_t parse_size(std::string_view text);
double parse_time(std::string_view text);  // seconds

// "12.3 us", "1.5 ms", "25 ps", "0 s": three significant digits in the
// largest unit (s, ms, us, ns, ps) that keeps the value at least 1.
std::string format_time(double seconds);

// "512 B", "4 KiB", "1.5 MiB", "3.91 KiB": binary units, three significant
// digits, exact values printed without a fraction.
std::string format_bytes(std::uint64_t bytes);

}  // namespace copse
