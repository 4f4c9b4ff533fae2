// Schedule files as schedules (algorithms/schedule_file.hpp): the plan of a
// parsed file, its proof by the verifier with the failure traced back to a
// line of the file, and the registry entries that "file:PATH" names resolve to.

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>

#include "algorithms/patterns.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/schedule_file.hpp"
#include "algorithms/verifier.hpp"
#include "common/error.hpp"

namespace copse {

namespace {

std::size_t u(int r) { return static_cast<std::size_t>(r); }

[[noreturn]] void fail(const ScheduleFile& f, int line, const std::string& what) {
  throw UsageError(f.path + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + what);
}

std::string served(const ScheduleFile& f) {
  std::string out;
  for (std::size_t i = 0; i < f.collectives.size(); ++i)
    out += (i == 0 ? "" : i + 1 == f.collectives.size() ? " and " : ", ") + std::string(to_string(f.collectives[i]));
  return out;
}

// The tree form: Bjørndalen's scripts -- per block, receive and combine from
// each child in the listed order, send to the parent (reduce); receive from
// the parent, send to each child (bcast) -- pipelined in blocks by the
// patterns every tree algorithm uses.
RankSchedule tree_schedule(std::shared_ptr<const ScheduleFile> f, Collective c, Shape shape, int rank) {
  const BlockPartition part(vector_elements(c, shape), shape.blocks);
  trees::Node node;
  node.parent = f->parent[u(rank)];
  node.children = f->children[u(rank)];
  const bool up = c != Collective::bcast, down = c != Collective::reduce;
  if (c == Collective::bcast)  // the data starts at the tree's root
    for (auto g = patterns::forward(rank, shape.root, f->root, part); g.next();) co_yield g.value();
  if (up)
    for (auto g = patterns::tree_reduce(rank, node, part); g.next();) co_yield g.value();
  if (down)
    for (auto g = patterns::tree_bcast(rank, node, part); g.next();) co_yield g.value();
  if (c == Collective::reduce)
    for (auto g = patterns::forward(rank, f->root, shape.root, part); g.next();) co_yield g.value();
}

// The step form, with block numbers turned into element ranges for one shape;
// `lines` says which line of the file each yielded step came from.
struct Materialised {
  std::vector<std::vector<Step>> steps;
  std::vector<std::vector<int>> lines;
};

std::shared_ptr<const Materialised> materialise(const ScheduleFile& f, Collective c, const Shape& shape) {
  const BlockPartition part(vector_elements(c, shape), f.blocks);
  // Blocks past the partition's end (fewer elements than blocks) are void.
  auto region = [&](const BlockRange& b) -> Transfer {
    if (b.peer < 0 || !part.valid(b.first)) return {};
    const long last = std::min<long>(b.last, part.blocks - 1);
    const auto lo = part.offset(b.first), hi = part.offset(last) + part.size(last);
    return Transfer{b.peer, lo, hi - lo};
  };
  auto m = std::make_shared<Materialised>();
  m->steps.resize(u(f.ranks));
  m->lines.resize(u(f.ranks));
  for (int r = 0; r < f.ranks; ++r)
    for (const FileStep& fs : f.steps[u(r)]) {
      Step s;
      s.send = region(fs.send);
      s.recv = region(fs.recv);
      s.combine = fs.combine;
      if (s.empty()) continue;
      m->steps[u(r)].push_back(s);
      m->lines[u(r)].push_back(fs.line);
    }
  return m;
}

RankSchedule replay(std::shared_ptr<const Materialised> m, int rank) {
  for (const Step& s : m->steps[u(rank)]) co_yield s;
}

// Throws unless `file` serves `c` with `shape`.
void check_fits(const ScheduleFile& f, Collective c, const Shape& shape) {
  if (!f.serves(c))
    fail(f, f.collective_line ? f.collective_line : f.body_line,
         "the file serves " + served(f) + ", not " + std::string(to_string(c)));
  if (shape.ranks != f.ranks)
    fail(f, f.ranks_line,
         "the schedule is written for " + std::to_string(f.ranks) + " ranks, but is run on " +
             std::to_string(shape.ranks) + " (under a hierarchy it runs among the off-node ranks)");
  if (f.form == ScheduleFile::Form::steps && (c == Collective::reduce || c == Collective::bcast) &&
      shape.root != f.steps_root)
    fail(f, f.root_line ? f.root_line : f.body_line,
         "the step list's root is rank " + std::to_string(f.steps_root) + ", but the run's root is " +
             std::to_string(shape.root));
}

SchedulePlan plan_of(std::shared_ptr<const ScheduleFile> f, Collective c, const Shape& shape,
                     std::shared_ptr<const Materialised>* keep = nullptr) {
  if (f->form == ScheduleFile::Form::tree) return [f, c, shape](int rank) { return tree_schedule(f, c, shape, rank); };
  auto m = materialise(*f, c, shape);
  if (keep) *keep = m;
  return [m](int rank) { return replay(m, rank); };
}

// What a verifier message names: the first "rank R step S" or "rank R is
// stuck in step S", and the first "rank R". A hand scan, not std::regex:
// GCC 12 warns inside libstdc++'s regex compiler under the sanitizer
// builds' -O1, and the two patterns are simple. -1: not named, or a number
// longer than nine digits.
struct NamedInMessage {
  long step_rank = -1, step = -1;  // from "rank R [is stuck in ]step S"
  long rank = -1;                  // from the first "rank R"
};

NamedInMessage named_in(const std::string& message) {
  auto number_at = [&](std::size_t& i) {
    const std::size_t start = i;
    while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
    if (i == start) return -2L;  // no digits
    return i - start > 9 ? -1L : std::stol(message.substr(start, i - start));
  };
  auto skip = [&](std::size_t& i, std::string_view word) {
    if (message.compare(i, word.size(), word) != 0) return false;
    i += word.size();
    return true;
  };
  NamedInMessage out;
  bool have_rank = false, have_step = false;
  for (std::size_t at = message.find("rank "); at != std::string::npos; at = message.find("rank ", at + 1)) {
    std::size_t i = at + 5;
    const long r = number_at(i);
    if (r == -2) continue;
    if (!have_rank) out.rank = r, have_rank = true;
    skip(i, " is stuck in");
    if (!have_step && skip(i, " step ")) {
      const long s = number_at(i);
      if (s != -2) out.step_rank = r, out.step = s, have_step = true;
    }
    if (have_step) break;
  }
  return out;
}

// The line a verifier message is about: the step it names ("rank R step S",
// "rank R is stuck in step S"), else the rank's own line, else the body line.
int line_of_failure(const ScheduleFile& f, const Materialised* m, const std::string& message) {
  const NamedInMessage named = named_in(message);
  if (const long r = named.step_rank, s = named.step; r >= 0 && r < f.ranks) {
    if (m && s >= 0 && static_cast<std::size_t>(s) < m->lines[u(static_cast<int>(r))].size())
      return m->lines[u(static_cast<int>(r))][static_cast<std::size_t>(s)];
    if (f.form == ScheduleFile::Form::tree) return f.line_of[static_cast<std::size_t>(r)];
  }
  if (const long r = named.rank; r >= 0 && r < f.ranks) {
    if (f.form == ScheduleFile::Form::tree) return f.line_of[static_cast<std::size_t>(r)];
    const auto& lines = m ? m->lines[static_cast<std::size_t>(r)] : std::vector<int>{};
    return lines.empty() ? f.first_line[static_cast<std::size_t>(r)] : lines.back();
  }
  return f.body_line;
}

// A shape the verifier can afford that proves `shape`. For the collectives
// whose every element starts alike (all but allgather and reduce_scatter),
// what a schedule does to an element depends only on its block. A tree's
// transfers name the same block at both ends, so any count with the same
// effective block count B proves the rest: 2B+1 (uneven blocks). A step
// list may match different blocks, whose sizes are q+1 (the first r blocks)
// or q; any q above B makes the same sizes equal, so (B+1)B + r elements
// prove every count with the same B and r.
Shape probe_shape(const ScheduleFile& f, Collective c, const Shape& shape) {
  if (c == Collective::allgather || c == Collective::reduce_scatter || c == Collective::barrier) return shape;
  const std::uint64_t n = vector_elements(c, shape);
  const bool tree = f.form == ScheduleFile::Form::tree;
  const auto b = static_cast<std::uint64_t>(BlockPartition(n, tree ? shape.blocks : f.blocks).blocks);
  Shape probe = shape;
  probe.count = std::min(n, tree ? 2 * b + 1 : (b + 1) * b + n % b);
  return probe;
}

VerifyResult prove(std::shared_ptr<const ScheduleFile> file, const AlgorithmInfo& info, const Shape& shape,
                   std::shared_ptr<const Materialised>& m) {
  return verify(info, plan_of(std::move(file), info.collective, shape, &m), shape);
}

struct Entry {
  std::string name, description;
  std::shared_ptr<const ScheduleFile> file;
  AlgorithmInfo info{};
  std::mutex mutex;
  std::set<std::tuple<int, std::uint64_t, int, int>> proven;  // probe shapes: ranks, count, blocks, root
};

// Proves `shape` (once per probe shape) and returns its plan.
SchedulePlan plan_entry(Entry& e, const Shape& shape) {
  const ScheduleFile& f = *e.file;
  const Collective c = e.info.collective;
  check_fits(f, c, shape);
  validate_shape(e.info, shape);
  const Shape probe = probe_shape(f, c, shape);
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    const auto key = std::tuple{probe.ranks, probe.count, f.form == ScheduleFile::Form::tree ? probe.blocks : 0,
                                c == Collective::reduce || c == Collective::bcast ? probe.root : 0};
    if (!e.proven.contains(key)) {
      std::shared_ptr<const Materialised> m;
      const VerifyResult r = prove(e.file, e.info, probe, m);
      if (!r.proven) fail(f, line_of_failure(f, m.get(), r.message), "the schedule is wrong: " + r.message);
      e.proven.insert(key);
    }
  }
  return plan_of(e.file, c, shape);
}

// AlgorithmInfo::plan is a plain function pointer, so each entry gets a slot
// whose function finds it; slots are handed out once and never reused.
constexpr std::size_t kSlots = 256;
std::array<std::atomic<Entry*>, kSlots> g_slots{};

template <std::size_t I>
SchedulePlan slot_plan(const Shape& shape) {
  return plan_entry(*g_slots[I].load(std::memory_order_acquire), shape);
}

template <std::size_t... I>
constexpr std::array<SchedulePlan (*)(const Shape&), kSlots> slot_functions(std::index_sequence<I...>) {
  return {&slot_plan<I>...};
}
constexpr auto kSlotFunctions = slot_functions(std::make_index_sequence<kSlots>{});

std::mutex g_table_mutex;
std::vector<std::unique_ptr<Entry>> g_entries;
std::map<std::tuple<Collective, std::string, std::string>, Entry*> g_index;  // (collective, path, text)

}  // namespace

SchedulePlan schedule_file_plan(std::shared_ptr<const ScheduleFile> file, Collective collective, const Shape& shape) {
  check_fits(*file, collective, shape);
  return plan_of(std::move(file), collective, shape);
}

const AlgorithmInfo& file_algorithm(Collective collective, std::string_view path_view) {
  const std::string path(path_view);
  if (path.empty()) throw UsageError("file: needs a path, e.g. file:examples/schedules/8w-groups-of-four.txt");
  std::string text = read_schedule_text(path);
  std::lock_guard<std::mutex> lock(g_table_mutex);
  auto key = std::tuple{collective, path, text};
  if (auto it = g_index.find(key); it != g_index.end()) return it->second->info;

  auto file = std::make_shared<const ScheduleFile>(parse_schedule_file(text, path));
  const ScheduleFile& f = *file;
  if (!f.serves(collective)) check_fits(f, collective, Shape{f.ranks, 1, 1, 0});
  if (g_entries.size() == kSlots)
    throw UsageError(path + ": too many schedule files in one process (" + std::to_string(kSlots) + ")");

  auto e = std::make_unique<Entry>();
  e->name = std::string(kScheduleFilePrefix) + path;
  e->description = "schedule file " + path + " (" + (f.form == ScheduleFile::Form::tree ? "tree" : "steps") + ", " +
                   std::to_string(f.ranks) + " ranks)";
  e->file = file;
  const bool tree = f.form == ScheduleFile::Form::tree;
  e->info = AlgorithmInfo{collective, e->name, e->description, false, tree, kSlotFunctions[g_entries.size()]};

  // Proven for the file's own ranks before anything runs it: for any
  // operator if the verifier proves it keeping rank order, else for
  // commutative ones only.
  const bool per_rank = collective == Collective::allgather || collective == Collective::reduce_scatter;
  Shape own{f.ranks, tree ? 1 : static_cast<std::uint64_t>(per_rank ? f.blocks : 2 * f.blocks + 1), 1,
            tree ? f.root : f.steps_root};
  if (collective != Collective::reduce && collective != Collective::bcast) own.root = 0;
  std::shared_ptr<const Materialised> m;
  VerifyResult ordered = prove(file, e->info, own, m);
  if (!ordered.proven) {
    e->info.needs_commutative = true;
    const VerifyResult any_order = prove(file, e->info, own, m);
    if (!any_order.proven)
      fail(f, line_of_failure(f, m.get(), any_order.message), "the schedule is wrong: " + any_order.message);
  }
  g_slots[g_entries.size()].store(e.get(), std::memory_order_release);
  Entry* entry = e.get();
  g_entries.push_back(std::move(e));
  g_index.emplace(std::move(key), entry);
  return entry->info;
}

}  // namespace copse
