#pragma once
// Small helpers the Catch2 suites share.

#include <unistd.h>

#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <numeric>
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

// A fresh directory under the system's temp dir, removed afterwards. Its
// name is digits only (copse-test-PID-N): tests match words in messages that
// quote its paths, and mkdtemp's random letters once spelled "8w" there.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> serial{0};
    const std::string stem = "copse-test-" + std::to_string(getpid()) + "-";
    for (;;) {
      path_ = std::filesystem::temp_directory_path() / (stem + std::to_string(++serial));
      if (std::filesystem::create_directory(path_)) return;  // false: it exists; throws on other errors
    }
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
