#pragma once
// What the configuration suites (tests/test_config*.cpp) share: a temporary
// directory, a guard for the COPSE_* environment, and ways to load and to
// catch a UsageError's message.

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "config/config.hpp"
#include "tests/support.hpp"

extern char** environ;

namespace config_test {

using copse::Config;
using copse::ConfigSource;
using copse::LoadArgs;
using copse::Options;
using copse::UsageError;
using Kind = copse::ConfigSource::Kind;
using copse::testing::TempDir;
namespace fs = std::filesystem;

// Clears every COPSE_* variable for the test's duration, then restores the
// environment as it was; set() and unset() in between.
class EnvGuard {
 public:
  EnvGuard() {
    for (char** e = environ; e && *e; ++e) {
      if (std::strncmp(*e, "COPSE_", 6) != 0) continue;
      const char* eq = std::strchr(*e, '=');
      if (!eq) continue;
      saved_.emplace_back(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
    }
    for (const auto& [name, value] : saved_) unsetenv(name.c_str());
  }
  ~EnvGuard() {
    for (const auto& name : touched_) unsetenv(name.c_str());
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

  void set(const std::string& name, const std::string& value) {
    touched_.push_back(name);
    setenv(name.c_str(), value.c_str(), 1);
  }
  void unset(const std::string& name) { unsetenv(name.c_str()); }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
  std::vector<std::string> touched_;
};

// The message of the UsageError that `f` throws (fails the test if none).
template <class F>
std::string usage_error(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("no UsageError thrown");
  return {};
}

// Loads with this file and an explicit (possibly empty) environment.
inline Config load_with(std::optional<std::string> file, std::vector<std::pair<std::string, std::string>> env = {}) {
  LoadArgs args;
  args.config_file = file ? std::move(*file) : std::string();
  args.environment = std::move(env);
  return Config::load(args);
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace config_test
