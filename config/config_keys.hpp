// Private to config/: the key table and the raw values it reads, shared by
// the table (config_keys.cpp) and the sources that feed it (config_load.cpp:
// the TOML file, the COPSE_* environment, Config::set).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace copse::config_detail {

// A value as one source wrote it, before it is checked and typed.
struct Raw {
  enum class Kind : std::uint8_t { text, string, integer, floating, boolean, array, table, date_time };
  Kind kind = Kind::text;  // text: the environment or Config::set (any type, as text)
  std::string str;         // text, string
  std::int64_t integer = 0;
  double floating = 0;
  bool boolean = false;
  std::string shown;  // how the value is quoted in errors: "fast", 4, true, [...], 1979-05-27
  std::string where;  // the source as errors name it: env COPSE_X, file PATH, line 3, cli
};

// TEXT in double quotes, with " and \ escaped: how errors show a value or path.
std::string quote_text(std::string_view text);

// A value given as text (the environment, Config::set), whatever its key's type.
Raw text_value(std::string_view text, std::string where);

// A value that does not fit the key; the reason is completed into a
// UsageError naming key, value and source by the caller.
struct BadValue {
  std::string reason;
};

struct KeyDef {
  ConfigKey info;
  void (*apply)(Options&, const Raw&);
  ConfigValue (*get)(const Options&);
};

// Every key, in documentation order (config_keys() is their ConfigKey parts).
std::span<const KeyDef> key_defs();

// The index in key_defs() of the key with this name, or this variable.
std::optional<std::size_t> key_index(std::string_view name);
std::optional<std::size_t> env_index(std::string_view name);

}  // namespace copse::config_detail
