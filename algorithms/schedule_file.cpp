// The schedule-file parser (algorithms/schedule_file.hpp): syntax and
// structure only, with no dependency beyond common/, so that the fuzz target
// (fuzz/schedule_file_fuzzer.cpp) builds it in seconds. Turning a parsed file
// into a schedule and proving it is in schedule_file_plan.cpp.

#include "algorithms/schedule_file.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

bool ScheduleFile::serves(Collective c) const {
  return std::find(collectives.begin(), collectives.end(), c) != collectives.end();
}

namespace {

// A token as a message quotes it: at most 40 characters, unprintable bytes as '?'.
std::string quoted(std::string_view token) {
  std::string out = "'";
  for (std::size_t i = 0; i < token.size() && i < 40; ++i) {
    const auto ch = static_cast<unsigned char>(token[i]);
    out += ch >= 0x20 && ch < 0x7f ? static_cast<char>(ch) : '?';
  }
  return out + (token.size() > 40 ? "...'" : "'");
}

std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && separators.find(text[i]) != std::string_view::npos) ++i;
    std::size_t j = i;
    while (j < text.size() && separators.find(text[j]) == std::string_view::npos) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

constexpr std::string_view kSpace = " \t\r\v\f";

class Parser {
 public:
  Parser(std::string_view text, const std::string& path) : text_(text) { file_.path = path; }

  ScheduleFile run() {
    std::size_t start = 0;
    while (start <= text_.size()) {
      const std::size_t end = std::min(text_.find('\n', start), text_.size());
      ++line_;
      std::string_view content = text_.substr(start, end - start);
      if (const auto hash = content.find('#'); hash != std::string_view::npos) content = content.substr(0, hash);
      parse_line(content);
      start = end + 1;
    }
    finish();
    return std::move(file_);
  }

 private:
  [[noreturn]] void fail(const std::string& what, int line = -1) const {
    const int at = line < 0 ? line_ : line;
    throw UsageError(file_.path + (at > 0 ? ":" + std::to_string(at) : std::string()) + ": " + what);
  }

  long long number(std::string_view token, std::string_view what, long long lo, long long hi) const {
    long long value = 0;
    const char* end = token.data() + token.size();
    const auto [ptr, ec] = std::from_chars(token.data(), end, value);
    if (ec == std::errc::result_out_of_range || (ec == std::errc{} && ptr == end && (value < lo || value > hi)))
      fail(std::string(what) + " " + quoted(token) + " is out of range [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]");
    if (ec != std::errc{} || ptr != end) fail("expected " + std::string(what) + " (a number), got " + quoted(token));
    return value;
  }

  int rank(std::string_view token, std::string_view what) const {
    return static_cast<int>(number(token, what, 0, file_.ranks - 1));
  }

  void parse_line(std::string_view content) {
    const auto colon = content.find(':');
    if (colon != std::string_view::npos) {
      const auto head = split(content.substr(0, colon), kSpace);
      if (head.size() != 1) fail("expected 'RANK: ...' before the colon, got " + quoted(content.substr(0, colon)));
      if (!in_body_) fail("a rank line before the 'tree' or 'steps' line");
      const int r = rank(head.front(), "a rank");
      if (file_.form == ScheduleFile::Form::tree)
        tree_line(r, content.substr(colon + 1));
      else
        steps_line(r, content.substr(colon + 1));
      return;
    }
    const auto words = split(content, kSpace);
    if (words.empty()) return;
    const std::string_view key = words.front();
    auto one_argument = [&] {
      if (words.size() != 2) fail("'" + std::string(key) + "' takes one value");
      return words[1];
    };
    if (in_body_ &&
        (key == "ranks" || key == "collective" || key == "blocks" || key == "root" || key == "tree" || key == "steps"))
      fail("'" + std::string(key) + "' must come before the '" + body_name() + "' line (line " +
           std::to_string(file_.body_line) + ")");
    if (key == "ranks") {
      if (file_.ranks_line) fail("'ranks' given twice (also on line " + std::to_string(file_.ranks_line) + ")");
      file_.ranks = static_cast<int>(number(one_argument(), "the rank count", 1, kScheduleFileMaxRanks));
      file_.ranks_line = line_;
    } else if (key == "collective") {
      if (collective_line_) fail("'collective' given twice (also on line " + std::to_string(collective_line_) + ")");
      if (words.size() < 2) fail("'collective' names at least one collective");
      collective_line_ = file_.collective_line = line_;
      for (std::size_t i = 1; i < words.size(); ++i) {
        Collective c{};
        try {
          c = parse_collective(words[i]);
        } catch (const UsageError& e) {
          fail(e.what());
        }
        if (std::find(file_.collectives.begin(), file_.collectives.end(), c) != file_.collectives.end())
          fail("collective " + quoted(words[i]) + " named twice");
        file_.collectives.push_back(c);
      }
    } else if (key == "blocks") {
      if (blocks_line_) fail("'blocks' given twice (also on line " + std::to_string(blocks_line_) + ")");
      file_.blocks = static_cast<int>(number(one_argument(), "the block count", 1, kScheduleFileMaxBlocks));
      blocks_line_ = line_;
    } else if (key == "root") {
      if (root_line_) fail("'root' given twice (also on line " + std::to_string(root_line_) + ")");
      root_text_ = one_argument();
      root_line_ = file_.root_line = line_;
    } else if (key == "tree" || key == "steps") {
      if (words.size() != 1) fail("'" + std::string(key) + "' stands alone on its line");
      if (!file_.ranks_line) fail("no 'ranks N' line before '" + std::string(key) + "'");
      file_.form = key == "tree" ? ScheduleFile::Form::tree : ScheduleFile::Form::steps;
      file_.body_line = line_;
      in_body_ = true;
      start_body();
    } else {
      fail("unknown keyword " + quoted(key) +
           " (expected ranks, collective, blocks, root, tree or steps, then lines 'RANK: ...')");
    }
  }

  std::string body_name() const { return file_.form == ScheduleFile::Form::tree ? "tree" : "steps"; }

  void start_body() {
    const auto p = static_cast<std::size_t>(file_.ranks);
    if (file_.form == ScheduleFile::Form::tree) {
      if (blocks_line_) fail("'blocks' is for step lists: a tree pipelines in the run's block count", blocks_line_);
      if (root_line_) fail("'root' is for step lists: a tree's root is the rank that is nobody's child", root_line_);
      if (file_.collectives.empty())
        file_.collectives = {Collective::allreduce, Collective::reduce, Collective::bcast, Collective::barrier};
      for (Collective c : file_.collectives)
        if (c == Collective::allgather || c == Collective::reduce_scatter)
          fail("a tree serves allreduce, reduce, bcast and barrier, not " + std::string(to_string(c)) +
                   " (write its steps instead)",
               collective_line_);
      file_.parent.assign(p, -1);
      file_.children.assign(p, {});
      file_.line_of.assign(p, 0);
      child_line_.assign(p, 0);
      children_line_.assign(p, 0);
    } else {
      if (file_.collectives.size() != 1)
        fail(file_.collectives.empty()
                 ? "a step list needs a 'collective' line naming the one collective it is"
                 : "a step list is one collective; 'collective' names " + std::to_string(file_.collectives.size()),
             collective_line_ ? collective_line_ : line_);
      if (static_cast<std::uint64_t>(file_.ranks) * static_cast<std::uint64_t>(file_.blocks) >
          kScheduleFileMaxRankBlocks)
        fail("ranks x blocks is at most " + std::to_string(kScheduleFileMaxRankBlocks) + " in a step list",
             blocks_line_ ? blocks_line_ : file_.ranks_line);
      if (root_line_) file_.steps_root = static_cast<int>(number_at(root_text_, "the root", root_line_));
      // A barrier is a one-element allreduce: an allreduce's steps serve it too.
      if (file_.collectives.front() == Collective::allreduce) file_.collectives.push_back(Collective::barrier);
      file_.steps.assign(p, {});
      file_.first_line.assign(p, 0);
    }
  }

  long long number_at(std::string_view token, std::string_view what, int line) {
    const int saved = line_;
    line_ = line;
    const long long v = number(token, what, 0, file_.ranks - 1);
    line_ = saved;
    return v;
  }

  void tree_line(int r, std::string_view rest) {
    const auto ur = static_cast<std::size_t>(r);
    if (children_line_[ur])
      fail("rank " + std::to_string(r) + "'s children are already listed on line " +
           std::to_string(children_line_[ur]));
    children_line_[ur] = line_;
    file_.line_of[ur] = line_;
    for (std::string_view token : split(rest, " \t\r\v\f,")) {
      const int c = rank(token, "a child rank");
      const auto uc = static_cast<std::size_t>(c);
      if (c == r) fail("rank " + std::to_string(r) + " lists itself as its child");
      if (file_.parent[uc] == r)
        fail("rank " + std::to_string(r) + " receives from rank " + std::to_string(c) +
             " twice: a child's partial result arrives once");
      if (file_.parent[uc] >= 0)
        fail("rank " + std::to_string(c) + " already sends to rank " + std::to_string(file_.parent[uc]) + " (line " +
             std::to_string(child_line_[uc]) + "): a rank has one parent");
      file_.parent[uc] = r;
      child_line_[uc] = line_;
      if (!file_.line_of[uc]) file_.line_of[uc] = line_;
      file_.children[ur].push_back(c);
    }
  }

  BlockRange blocks_of(int peer, const std::vector<std::string_view>& words, std::size_t& i) const {
    BlockRange b{peer, 0, file_.blocks - 1};
    if (i >= words.size()) return b;
    if (words[i] == "all") {
      ++i;
      return b;
    }
    if (words[i] != "block" && words[i] != "blocks") return b;
    if (++i >= words.size()) fail("'" + std::string(words[i - 1]) + "' needs a block number or a range J-K");
    const std::string_view spec = words[i++];
    const auto dash = spec.find('-');
    const long long hi = file_.blocks - 1;
    b.first = static_cast<int>(number(spec.substr(0, dash), "a block", 0, hi));
    b.last =
        dash == std::string_view::npos ? b.first : static_cast<int>(number(spec.substr(dash + 1), "a block", 0, hi));
    if (b.last < b.first) fail("block range " + quoted(spec) + " runs backwards");
    return b;
  }

  void steps_line(int r, std::string_view rest) {
    const auto ur = static_cast<std::size_t>(r);
    if (!file_.first_line[ur]) file_.first_line[ur] = line_;
    const auto ops = split(rest, ",;");
    bool any = false;
    FileStep step;
    step.line = line_;
    for (std::string_view op : ops) {
      const auto words = split(op, kSpace);
      if (words.empty()) continue;
      any = true;
      const std::string_view verb = words.front();
      if (verb != "send" && verb != "recv")
        fail("unknown operation " + quoted(verb) + " (expected 'send PEER [BLOCKS]' or 'recv PEER [BLOCKS] [SIDE]')");
      if (words.size() < 2) fail("'" + std::string(verb) + "' needs a peer rank");
      const int peer = rank(words[1], "a peer rank");
      if (peer == r) fail("rank " + std::to_string(r) + " " + std::string(verb) + "s to itself");
      std::size_t i = 2;
      const BlockRange b = blocks_of(peer, words, i);
      if (verb == "send") {
        if (step.send.peer >= 0) fail("two sends in one step (one send and one receive at most)");
        step.send = b;
      } else {
        if (step.recv.peer >= 0) fail("two receives in one step (one send and one receive at most)");
        step.recv = b;
        if (i < words.size()) {
          const std::string_view side = words[i++];
          if (side == "replace")
            step.combine = Combine::replace;
          else if (side == "left")
            step.combine = Combine::left;
          else if (side == "right")
            step.combine = Combine::right;
          else if (side == "combine")  // in rank order: a lower peer's data comes first
            step.combine = peer < r ? Combine::left : Combine::right;
          else
            fail("unknown receive mode " + quoted(side) + " (expected replace, combine, left or right)");
        }
      }
      if (i < words.size()) fail("unexpected " + quoted(words[i]) + " after '" + std::string(verb) + "'");
    }
    if (any) file_.steps[ur].push_back(step);
  }

  void finish() {
    const int last = line_;
    if (!in_body_) fail("no 'tree' or 'steps' line: the file describes no schedule", last);
    if (file_.form == ScheduleFile::Form::tree)
      finish_tree();
    else
      for (int r = 0; r < file_.ranks; ++r)
        if (!file_.first_line[static_cast<std::size_t>(r)])
          fail("rank " + std::to_string(r) + " has no line (write '" + std::to_string(r) +
                   ":' for a rank with nothing to do)",
               file_.ranks_line);
  }

  void finish_tree() {
    const int p = file_.ranks;
    auto u = [](int r) { return static_cast<std::size_t>(r); };
    for (int r = 0; r < p && p > 1; ++r)
      if (file_.parent[u(r)] < 0 && file_.children[u(r)].empty())
        fail("rank " + std::to_string(r) + " is missing from the tree: it has no parent and no children",
             file_.ranks_line);
    // Cycles: follow parents from every rank; meeting a rank of the current
    // walk again closes a cycle.
    std::vector<std::uint8_t> state(u(p), 0);  // 0 unseen, 1 on the current walk, 2 done
    for (int r = 0; r < p; ++r) {
      int x = r;
      while (x >= 0 && state[u(x)] == 0) {
        state[u(x)] = 1;
        x = file_.parent[u(x)];
      }
      if (x >= 0 && state[u(x)] == 1) {
        std::string cycle = std::to_string(x);
        int y = file_.parent[u(x)];
        for (int n = 0; y != x && n < 8; ++n, y = file_.parent[u(y)]) cycle += " -> " + std::to_string(y);
        fail("cycle: " + cycle + (y == x ? "" : " -> ...") + " -> " + std::to_string(x) +
                 " (each rank sends to the next): the ranks on a cycle never reach the root",
             child_line_[u(x)]);
      }
      for (x = r; x >= 0 && state[u(x)] == 1; x = file_.parent[u(x)]) state[u(x)] = 2;
    }
    std::vector<int> roots;
    for (int r = 0; r < p; ++r)
      if (file_.parent[u(r)] < 0) roots.push_back(r);
    if (roots.size() != 1)  // none is impossible without a cycle
      fail("the tree has " + std::to_string(roots.size()) + " roots (ranks " +
               join(std::vector<int>(roots.begin(), roots.begin() + std::min<long>(8, std::ssize(roots))), ", ") +
               (roots.size() > 8 ? ", ..." : "") + "): every rank but one must be some rank's child",
           file_.ranks_line);
    file_.root = roots.front();
    if (!file_.line_of[u(file_.root)]) file_.line_of[u(file_.root)] = file_.body_line;
  }

  std::string_view text_;
  ScheduleFile file_;
  int line_ = 0;
  bool in_body_ = false;
  int collective_line_ = 0, blocks_line_ = 0, root_line_ = 0;
  std::string_view root_text_;
  std::vector<int> child_line_;     // tree: the line listing r as a child
  std::vector<int> children_line_;  // tree: the line listing r's children
};

}  // namespace

ScheduleFile parse_schedule_file(std::string_view text, const std::string& path) {
  if (text.size() > kScheduleFileMaxBytes)
    throw UsageError(path + ": larger than " + std::to_string(kScheduleFileMaxBytes >> 20) +
                     " MiB: not a schedule file");
  return Parser(text, path).run();
}

std::string read_schedule_text(const std::string& path) {
  // Only regular files: a directory reads as nothing, and opening a FIFO
  // would wait for a writer.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    if (std::filesystem::exists(path, ec)) throw UsageError(path + ": not a regular file, so not a schedule file");
    throw UsageError(path + ": cannot open the schedule file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot open the schedule file");
  // Read at most one byte past the limit: a device or a huge file is refused
  // without reading it all.
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kScheduleFileMaxBytes && in.read(chunk, sizeof chunk)) text.append(chunk, sizeof chunk);
  if (in.bad()) throw UsageError(path + ": cannot read the schedule file");
  text.append(chunk, static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  if (text.size() > kScheduleFileMaxBytes)
    throw UsageError(path + ": larger than " + std::to_string(kScheduleFileMaxBytes >> 20) +
                     " MiB: not a schedule file");
  return text;
}

ScheduleFile read_schedule_file(const std::string& path) { return parse_schedule_file(read_schedule_text(path), path); }

}  // namespace copse
