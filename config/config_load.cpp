// Config's sources, applied in order over the defaults: the TOML file, the
// COPSE_* environment, then Config::set (--set); unknown names are reported
// with a near miss suggested.
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/error.hpp"
#include "common/progress.hpp"
#include "common/text.hpp"
#include "config/config.hpp"
#include "config/config_keys.hpp"

extern char** environ;  // POSIX

namespace copse {

using config_detail::BadValue;
using config_detail::env_index;
using config_detail::key_defs;
using config_detail::key_index;
using config_detail::KeyDef;
using config_detail::quote_text;
using config_detail::Raw;
using config_detail::text_value;

namespace {

// ---------------------------------------------------------------- unknown names

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "NAME (did you mean X?)" for a near miss among `known`.
std::string with_suggestion(const std::string& name, const std::vector<std::string_view>& known) {
  std::string_view best;
  std::size_t best_distance = 4;  // at most 3 edits
  for (std::string_view k : known) {
    const std::size_t d = edit_distance(name, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return best.empty() ? name : name + " (did you mean " + std::string(best) + "?)";
}

[[noreturn]] void unknown_names(std::string_view what, const std::vector<std::string>& names,
                                const std::vector<std::string_view>& known, std::string_view where) {
  std::vector<std::string> described;
  bool all_suggested = true;
  for (const auto& n : names) {
    described.push_back(with_suggestion(n, known));
    all_suggested = all_suggested && described.back() != n;
  }
  std::string message =
      "unknown " + std::string(what) + (names.size() == 1 ? " " : "s ") + join(described, ", ") + std::string(where);
  // A near miss says enough; otherwise list what is known.
  if (!all_suggested) message += "; known: " + join(known, ", ");
  throw UsageError(message);
}

std::vector<std::string_view> known_keys() {
  std::vector<std::string_view> out;
  for (const auto& k : key_defs()) out.push_back(k.info.name);
  return out;
}

std::vector<std::string_view> known_env() {
  std::vector<std::string_view> out{kConfigFileEnv};
  for (const auto& k : key_defs()) out.push_back(k.info.env);
  return out;
}

// ---------------------------------------------------------------- TOML

Raw toml_value(const toml::node& node, std::string where) {
  Raw r;
  r.where = std::move(where);
  if (const auto* s = node.as_string()) {
    r.kind = Raw::Kind::string;
    r.str = s->get();
    r.shown = quote_text(r.str);
  } else if (const auto* i = node.as_integer()) {
    r.kind = Raw::Kind::integer;
    r.integer = i->get();
    r.shown = std::to_string(r.integer);
  } else if (const auto* f = node.as_floating_point()) {
    r.kind = Raw::Kind::floating;
    r.floating = f->get();
    char buffer[64];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, r.floating);
    r.shown = ec == std::errc{} ? std::string(buffer, end) : std::string("nan");
  } else if (const auto* b = node.as_boolean()) {
    r.kind = Raw::Kind::boolean;
    r.boolean = b->get();
    r.shown = r.boolean ? "true" : "false";
  } else if (node.is_array()) {
    r.kind = Raw::Kind::array;
    r.shown = "[...]";
  } else if (node.is_table()) {
    r.kind = Raw::Kind::table;
    r.shown = "{...}";
  } else {
    r.kind = Raw::Kind::date_time;
    std::ostringstream o;
    if (const auto* date = node.as_date())
      o << date->get();
    else if (const auto* time = node.as_time())
      o << time->get();
    else if (const auto* date_time = node.as_date_time())
      o << date_time->get();
    r.shown = o.str();
  }
  return r;
}

std::string line_of(const toml::node& node) {
  const auto& begin = node.source().begin;
  return begin.line ? ", line " + std::to_string(begin.line) : std::string();
}

std::vector<std::string> get_env_names(const LoadArgs& args) {
  std::vector<std::string> names;
  if (args.environment) {
    for (const auto& [name, value] : *args.environment) names.push_back(name);
  } else {
    for (char** e = environ; e && *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      names.emplace_back(*e, eq ? static_cast<std::size_t>(eq - *e) : std::strlen(*e));
    }
  }
  return names;
}

std::optional<std::string> get_env(const LoadArgs& args, std::string_view name) {
  if (args.environment) {
    for (const auto& [n, value] : *args.environment)
      if (n == name) return value;
    return std::nullopt;
  }
  const char* value = std::getenv(std::string(name).c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

}  // namespace

// ---------------------------------------------------------------- Config

struct ConfigLoader {
  static void apply(Config& config, std::size_t index, const Raw& raw, ConfigSource source) {
    const KeyDef& key = key_defs()[index];
    try {
      key.apply(config.options_, raw);
    } catch (const BadValue& bad) {
      throw UsageError(std::string(key.info.name) + " = " + raw.shown + " (from " + raw.where + "): " + bad.reason);
    }
    config.sources_[index] = std::move(source);
  }

  static void read_file(Config& config, const std::string& path, const std::string& origin) {
    std::ifstream in(path, std::ios::binary);
    std::error_code ec;
    if (!in || std::filesystem::is_directory(path, ec)) {
      const std::string why = in ? "is a directory" : std::strerror(errno);
      throw UsageError("cannot read config file " + quote_text(path) + " (from " + origin + "): " + why);
    }
    std::ostringstream text;
    text << in.rdbuf();
    toml::table root;
    try {
      root = toml::parse(text.str(), path);
    } catch (const toml::parse_error& e) {
      const auto& at = e.source().begin;
      throw UsageError("config file " + path + ", line " + std::to_string(at.line) + ", column " +
                       std::to_string(at.column) + ": " + std::string(e.description()));
    }

    // Every name first, so that a typo is reported before any value.
    std::vector<std::string> unknown;
    std::vector<std::pair<std::size_t, const toml::node*>> found;
    for (const auto& [section_key, section] : root) {
      const std::string section_name(section_key.str());
      const auto* table = section.as_table();
      bool known_section = false;
      for (const auto& k : key_defs())
        if (k.info.name.substr(0, k.info.name.find('.')) == section_name) known_section = true;
      if (known_section && !table)
        throw UsageError("config file " + path + line_of(section) + ": " + section_name + " must be a table ([" +
                         section_name + "])");
      if (!known_section) {
        if (!table || table->empty()) unknown.push_back(section_name);
        if (table)
          for (const auto& entry : *table) unknown.push_back(section_name + "." + std::string(entry.first.str()));
        continue;
      }
      for (const auto& [key, node] : *table) {
        const std::string name = section_name + "." + std::string(key.str());
        if (const auto index = key_index(name)) {
          found.emplace_back(*index, &node);
        } else {
          unknown.push_back(name);
        }
      }
    }
    if (!unknown.empty()) unknown_names("key", unknown, known_keys(), " in config file " + path);

    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [index, node] : found)
      apply(config, index, toml_value(*node, "file " + path + line_of(*node)),
            ConfigSource{ConfigSource::Kind::file, path});
  }

  static void read_env(Config& config, const LoadArgs& args) {
    std::vector<std::string> unknown;
    for (const auto& name : get_env_names(args)) {
      if (name.rfind("COPSE_", 0) != 0 || name == kConfigFileEnv || name == kProgressAfterEnv) continue;
      if (!env_index(name)) unknown.push_back(name);
    }
    if (!unknown.empty()) {
      std::sort(unknown.begin(), unknown.end());
      unknown_names("environment variable", unknown, known_env(), "");
    }
    for (std::size_t i = 0; i < key_defs().size(); ++i) {
      const std::string_view env = key_defs()[i].info.env;
      if (const auto value = get_env(args, env))
        apply(config, i, text_value(*value, "env " + std::string(env)),
              ConfigSource{ConfigSource::Kind::env, std::string(env)});
    }
  }
};

Config::Config() : sources_(key_defs().size()) {}

Config Config::load(const LoadArgs& args) {
  Config config;
  std::optional<std::string> path;
  std::string origin;
  bool must_exist = true;
  if (args.config_file) {
    path = *args.config_file;
    origin = "--config";
  } else if (auto env = get_env(args, kConfigFileEnv)) {
    path = std::move(*env);
    origin = "env " + std::string(kConfigFileEnv);
  } else {
    path = "./copse.toml";
    origin = "working directory";
    must_exist = false;
  }
  if (path && path->empty()) path.reset();  // an empty name: no file
  if (path && !must_exist) {
    std::error_code ec;
    if (!std::filesystem::exists(*path, ec)) path.reset();
  }
  if (path) {
    ConfigLoader::read_file(config, *path, origin);
    config.file_ = path;
    config.file_origin_ = origin;
  }
  ConfigLoader::read_env(config, args);
  return config;
}

void Config::set(std::string_view key, std::string_view value) {
  const auto index = key_index(key);
  if (!index) unknown_names("key", {std::string(key)}, known_keys(), "");
  // A key's reader throws before it assigns, so a bad value changes nothing.
  ConfigLoader::apply(*this, *index, text_value(value, "cli"), ConfigSource{ConfigSource::Kind::explicit_setting, ""});
}

namespace {
std::size_t checked_index(std::string_view key) {
  const auto index = key_index(key);
  if (!index) unknown_names("key", {std::string(key)}, known_keys(), "");
  return *index;
}
}  // namespace

const ConfigSource& Config::source_of(std::string_view key) const { return sources_[checked_index(key)]; }

ConfigValue Config::value(std::string_view key) const { return key_defs()[checked_index(key)].get(options_); }

std::string Config::value_text(std::string_view key) const {
  const ConfigValue v = value(key);
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(&v)) return exact_time_text(*d);
  return std::get<std::string>(v);
}

}  // namespace copse
