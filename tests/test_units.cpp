// Sizes and times as the command line reads them, and as humans read them back.

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "common/error.hpp"
#include "common/units.hpp"

using copse::format_bytes;
using copse::format_time;
using copse::parse_size;
using copse::parse_time;
using copse::UsageError;

TEST_CASE("parse_size reads plain, scientific, decimal and binary sizes", "[units]") {
  CHECK(parse_size("0") == 0);
  CHECK(parse_size("1000") == 1000);
  CHECK(parse_size("1e6") == 1000000);
  CHECK(parse_size("1E3") == 1000);
  CHECK(parse_size("1e+3") == 1000);
  CHECK(parse_size("12B") == 12);
  CHECK(parse_size("4KiB") == 4096);
  CHECK(parse_size("1MiB") == 1048576);
  CHECK(parse_size("2GiB") == 2147483648ULL);
  CHECK(parse_size("1TiB") == (1ULL << 40));
  CHECK(parse_size("4KB") == 4000);
  CHECK(parse_size("4kB") == 4000);
  CHECK(parse_size("3MB") == 3000000);
  CHECK(parse_size("5GB") == 5000000000ULL);
  CHECK(parse_size("2TB") == 2000000000000ULL);
  CHECK(parse_size("1.5MiB") == 1572864);
  CHECK(parse_size("0.5KiB") == 512);
  CHECK(parse_size("0.1KB") == 100);
  CHECK(parse_size(".5KiB") == 512);
  CHECK(parse_size("2.KiB") == 2048);
  CHECK(parse_size("1500e-3KB") == 1500);
  CHECK(parse_size("0.0") == 0);
  CHECK(parse_size("0e99999999") == 0);
  CHECK(parse_size("007") == 7);
  CHECK(parse_size("1.0009765625KiB") == 1025);
  CHECK(parse_size("18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
  CHECK(parse_size("16777215TiB") == (16777215ULL << 40));
}

namespace {
std::string usage_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}
}  // namespace

TEST_CASE("parse_size refuses bad text with a message quoting it", "[units]") {
  using Catch::Matchers::Contains;
  const auto size_error = [](const char* text) { return usage_message([&] { parse_size(text); }); };

  CHECK_THAT(size_error(""), Contains("\"\"") && Contains("empty"));
  CHECK_THAT(size_error("-4KiB"), Contains("\"-4KiB\"") && Contains("negative"));
  CHECK_THAT(size_error("abc"), Contains("\"abc\"") && Contains("expected a number"));
  CHECK_THAT(size_error("4XB"), Contains("\"4XB\"") && Contains("unknown unit \"XB\""));
  CHECK_THAT(size_error("4KiBx"), Contains("unknown unit \"KiBx\""));
  CHECK_THAT(size_error("4 KiB"), Contains("unknown unit \" KiB\""));
  CHECK_THAT(size_error(" 4"), Contains("expected a number"));
  CHECK_THAT(size_error("1.5"), Contains("\"1.5\"") && Contains("whole number"));
  CHECK_THAT(size_error("1e-1"), Contains("whole number"));
  CHECK_THAT(size_error("0.3KiB"), Contains("whole number"));
  CHECK_THAT(size_error("18446744073709551616"), Contains("too large"));
  CHECK_THAT(size_error("16EB"), Contains("unknown unit"));
  CHECK_THAT(size_error("16777216TiB"), Contains("too large"));
  CHECK_THAT(size_error("1e20"), Contains("too large"));
  CHECK_THAT(size_error("1e99999999999999"), Contains("too large"));
  CHECK_THAT(size_error("1e"), Contains("unknown unit \"e\""));
  CHECK_THAT(size_error("."), Contains("expected a number"));
  CHECK_THAT(size_error("+5"), Contains("expected a number"));
  CHECK_THAT(size_error("inf"), Contains("expected a number"));
  CHECK_THAT(size_error("nan"), Contains("expected a number"));
  CHECK_THAT(size_error("0x10"), Contains("unknown unit \"x10\""));
  CHECK_THAT(size_error("1.2.3"), Contains("unknown unit \".3\""));
  CHECK_THAT(size_error("123456789012345678901234567"), Contains("too many significant digits"));
  // Every message is a single line.
  CHECK(size_error("4XB").find('\n') == std::string::npos);
}

TEST_CASE("parse_time reads seconds with optional units", "[units]") {
  CHECK(parse_time("2us") == 2e-6);
  CHECK(parse_time("0.1ns") == 1e-10);
  CHECK(parse_time("1e-6") == 1e-6);
  CHECK(parse_time("5ms") == 5e-3);
  CHECK(parse_time("1s") == 1.0);
  CHECK(parse_time("1") == 1.0);
  CHECK(parse_time("3.5us") == 3.5e-6);
  CHECK(parse_time("25ps") == 25e-12);
  CHECK(parse_time("0.025ns") == 2.5e-11);
  CHECK(parse_time("1.5e3ns") == 1.5e-6);
  CHECK(parse_time("2\xC2\xB5s") == 2e-6);
  CHECK(parse_time("2\xCE\xBCs") == 2e-6);
  CHECK(parse_time("0") == 0.0);
  CHECK(parse_time(".5s") == 0.5);
}

TEST_CASE("parse_time refuses bad text with a message quoting it", "[units]") {
  using Catch::Matchers::Contains;
  const auto time_error = [](const char* text) { return usage_message([&] { parse_time(text); }); };

  CHECK_THAT(time_error(""), Contains("empty"));
  CHECK_THAT(time_error("-1us"), Contains("\"-1us\"") && Contains("negative"));
  CHECK_THAT(time_error("fast"), Contains("\"fast\"") && Contains("expected a number"));
  CHECK_THAT(time_error("2usec"), Contains("unknown unit \"usec\""));
  CHECK_THAT(time_error("2 us"), Contains("unknown unit \" us\""));
  CHECK_THAT(time_error("2m"), Contains("unknown unit \"m\""));
  CHECK_THAT(time_error("inf"), Contains("expected a number"));
  CHECK_THAT(time_error("nan"), Contains("expected a number"));
  CHECK_THAT(time_error("1e999"), Contains("out of range"));
  CHECK_THAT(time_error("1e99999999999"), Contains("out of range"));
}

TEST_CASE("format_time picks the unit that keeps three significant digits readable", "[units]") {
  CHECK(format_time(0) == "0 s");
  CHECK(format_time(12.3e-6) == "12.3 us");
  CHECK(format_time(1.5e-6) == "1.5 us");
  CHECK(format_time(2.5e-11) == "25 ps");
  CHECK(format_time(1e-10) == "100 ps");
  CHECK(format_time(0.0123456) == "12.3 ms");
  CHECK(format_time(2.0) == "2 s");
  CHECK(format_time(999.7e-6) == "1 ms");
  CHECK(format_time(999.7) == "1000 s");
  CHECK(format_time(12345.0) == "12345 s");
  CHECK(format_time(-3e-9) == "-3 ns");
  CHECK(format_time(1e-13) == "0.1 ps");
}

TEST_CASE("format_bytes uses binary units", "[units]") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1 KiB");
  CHECK(format_bytes(4000) == "3.91 KiB");
  CHECK(format_bytes(1536 * 1024) == "1.5 MiB");
  CHECK(format_bytes(1048576) == "1 MiB");
  CHECK(format_bytes(2147483648ULL) == "2 GiB");
  CHECK(format_bytes(1024 * 1000) == "1000 KiB");
  CHECK(format_bytes(1024 * 1024 - 1) == "1 MiB");
  CHECK(format_bytes(std::numeric_limits<std::uint64_t>::max()) == "16 EiB");
  // Round trip through the parser for exact binary values.
  CHECK(parse_size("1.5MiB") == 1536 * 1024);
}
