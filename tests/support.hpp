#pragma once
// Small helpers the Catch2 suites share.

#include <stdlib.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace copse::testing {

// The message of a captured exception ("" for none, "unknown exception" for
// one that is not a std::exception).
inline std::string message_of(const std::exception_ptr& e) {
  if (!e) return "";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// The ranks first, first + 1, ..., last.
inline std::vector<int> inclusive_range(int first, int last) {
  std::vector<int> ranks(static_cast<std::size_t>(last - first + 1));
  std::iota(ranks.begin(), ranks.end(), first);
  return ranks;
}

// A fresh directory under the system's temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "copse-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to NAME in the directory; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::filesystem::path file = path_ / name;
    std::ofstream(file) << text;
    return file.string();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace copse::testing
