// libFuzzer target for the schedule-file parser (algorithms/schedule_file.hpp):
// any bytes either parse into a file whose structure holds what the parser
// promises, or are refused with one UsageError naming the file. Anything else
// -- a crash, a sanitizer report, another exception, a hang -- is a finding.
// Built and run for a bounded time by fuzz/run.sh (CTest: fuzz_schedule_file).

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "algorithms/schedule_file.hpp"
#include "common/error.hpp"

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

// What a parsed file promises: ranks in range, a tree with one root whose
// parents lead to it, every step's peers and blocks in range.
void check(const copse::ScheduleFile& f) {
  require(f.ranks >= 1 && f.ranks <= copse::kScheduleFileMaxRanks && !f.collectives.empty());
  const auto p = static_cast<std::size_t>(f.ranks);
  if (f.form == copse::ScheduleFile::Form::tree) {
    require(f.parent.size() == p && f.children.size() == p && f.parent[static_cast<std::size_t>(f.root)] == -1);
    for (std::size_t r = 0; r < p; ++r) {
      int x = static_cast<int>(r);
      for (std::size_t hops = 0; x != f.root; ++hops) {
        require(hops < p && x >= 0 && x < f.ranks);
        x = f.parent[static_cast<std::size_t>(x)];
      }
    }
    return;
  }
  require(f.collectives.size() <= 2 && f.steps.size() == p && f.blocks >= 1);
  for (std::size_t r = 0; r < p; ++r)
    for (const auto& s : f.steps[r])
      for (const auto& b : {s.send, s.recv})
        require(b.peer < 0 || (b.peer < f.ranks && b.peer != static_cast<int>(r) && 0 <= b.first && b.first <= b.last &&
                               b.last < f.blocks));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    check(copse::parse_schedule_file(text, "fuzz.txt"));
  } catch (const copse::UsageError& e) {
    require(std::string_view(e.what()).starts_with("fuzz.txt"));
  }
  return 0;
}
