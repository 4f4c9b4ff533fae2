// Report mode of bench/mpi_collectives.cpp (--report FILE..., no mpirun):
// pools the JSON lines of several runs (rounds of the same config, label,
// collective, form, root and size: min and median over all their
// repetitions) and prints per config, collective and form one row per size
// with every label's min and median and the ratio baseline/label (above 1:
// the label is faster than the baseline); --csv FILE writes the same
// figures, one row per label, the form last (a line without one, from before
// --forms, is the blocking call's).
//
// A baseline timed in the label's own processes (--native: its lines say
// "beside" that label) is the label's baseline: copse tune --paired runs
// copse in several variants (hierarchy forms, block counts), each launch
// with the library's calls beside it, and the launches differ by more than
// the sides within one (np 4 on 2 virtual nodes, reduce 512 KiB: the
// library's median 200 us beside copse as configured, 500 beside its lanes
// form). Pooled over every launch, the library's 473 us made copse's 208
// look 2.3 times faster where beside it the two were level.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "mpi_collectives.hpp"

namespace mpi_collectives {

// The text and statistics helpers both modes share (mpi_collectives.hpp).
const Collective* collective_named(const std::string& name) {
  for (const Collective& c : kCollectives)
    if (name == c.name) return &c;
  return nullptr;
}

std::string human(std::size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0)
    std::snprintf(buf, sizeof buf, "%zu MiB", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0)
    std::snprintf(buf, sizeof buf, "%zu KiB", bytes >> 10);
  else
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  return buf;
}

std::size_t parse_size(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || v < 0) return 0;
  const std::string unit(end);
  if (unit == "K" || unit == "KiB")
    v *= 1024;
  else if (unit == "M" || unit == "MiB")
    v *= 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    return 0;
  return static_cast<std::size_t>(v);
}

std::vector<std::string> split(const std::string& list, char sep) {
  std::vector<std::string> items;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, sep);)
    if (!item.empty()) items.push_back(item);
  return items;
}

// Microseconds with about three significant figures, right-aligned.
std::string us(double seconds, int width) {
  char buf[48];
  const double v = seconds * 1e6;
  std::snprintf(buf, sizeof buf, v < 10 ? "%*.2f" : v < 1000 ? "%*.1f" : "%*.0f", width, v);
  return buf;
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

namespace {

struct Pooled {
  std::vector<double> times;
  bool ok = true;
  int runs = 0;
};

// Every run's lines, pooled.
struct Results {
  // (config, collective index, form, root, bytes) -> label -> pooled repetitions
  using Key = std::tuple<std::string, int, std::string, int, std::size_t>;
  std::map<Key, std::map<std::string, Pooled>> data;
  std::vector<std::string> configs, labels;  // in order of first appearance
  std::map<std::string, int> np_of;
};

// The labels' columns: the baseline's and the others', whose ratios
// baseline/label are printed.
struct Columns {
  std::string base;
  std::vector<std::string> labels, others;
};

// Sums per file the call counts an interposed library reports, one JSON line
// per process: {"rank": r, "size": p, "served": {"allreduce": n, ...},
// "passed": {...}, and for the other call forms "nonblocking" and
// "persistent": {"served": {...}, "passed": {...}}} (copse's
// COPSE_MPI_STATS). It says whether the library under test ran the calls or
// handed them to the MPI library underneath: a ratio near 1 means nothing if
// copse passed everything through.
int print_stats(const std::vector<std::string>& files) {
  std::printf("\nCalls the interposed library served and passed on, summed over processes and rounds:\n");
  for (const std::string& path : files) {
    std::ifstream in(path);
    // "served"/"passed" (blocking), then "nonblocking served" ... -> collective -> calls
    std::map<std::string, std::map<std::string, long long>> sums;
    int lines = 0;
    try {
      for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        const json j = json::parse(line);
        for (const char* kind : {"served", "passed"}) {
          for (const auto& [name, calls] : j.at(kind).items()) sums[kind][name] += calls.get<long long>();
          for (const char* form : {"nonblocking", "persistent"})
            if (j.contains(form))
              for (const auto& [name, calls] : j.at(form).at(kind).items())
                sums[std::string(form) + " " + kind][name] += calls.get<long long>();
        }
        ++lines;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "mpi_collectives: %s: not a statistics line (%s)\n", path.c_str(), e.what());
      return 2;
    }
    std::printf("  %s: %d process record(s)%s\n", path.c_str(), lines, lines ? "" : " (the library wrote none)");
    for (const char* kind :
         {"served", "passed", "nonblocking served", "nonblocking passed", "persistent served", "persistent passed"}) {
      std::string text;
      for (const auto& [name, calls] : sums[kind])
        if (calls) text += (text.empty() ? "" : ", ") + name + " " + std::to_string(calls);
      if (!text.empty() || !std::strchr(kind, ' '))
        std::printf("    %s: %s\n", kind, text.empty() ? "none" : text.c_str());
    }
  }
  return 0;
}

// The pool of `label`'s runs timed beside label `other` (kept under this
// key beside the labels; not itself a column).
std::string beside(const std::string& label, const std::string& other) { return label + " beside " + other; }

// The baseline's pool to hold label `l` against: its runs beside `l` if
// there are any, else all of them (by_label.end(): none).
std::map<std::string, Pooled>::const_iterator baseline_for(const std::map<std::string, Pooled>& by_label,
                                                           const std::string& base, const std::string& l) {
  const auto paired = by_label.find(beside(base, l));
  return paired != by_label.end() ? paired : by_label.find(base);
}

// Reads the result lines of `files` into `r`; 0, or 2 on an unreadable file
// or line.
int load_results(const std::vector<std::string>& files, Results& r) {
  auto remember = [](std::vector<std::string>& list, const std::string& item) {
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
  };
  std::map<std::string, std::string> sync_of;  // "config label" -> its line-up
  for (const std::string& path : files) {
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "mpi_collectives: cannot read %s\n", path.c_str());
      return 2;
    }
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty()) continue;
      try {
        const json j = json::parse(line);
        const Collective* c = collective_named(j.at("collective").get<std::string>());
        if (!c) throw std::runtime_error("unknown collective");
        const int index = static_cast<int>(c - kCollectives);
        const int root = j.at("root").is_null() ? -1 : j.at("root").get<int>();
        const std::string config = j.at("config").get<std::string>(), label = j.at("label").get<std::string>();
        const std::string form = j.contains("form") ? j.at("form").get<std::string>() : "blocking";
        // Pooled times must have started from the same line-up (--sync).
        const std::string sync = j.contains("sync") ? j.at("sync").get<std::string>() : "barrier";
        if (const auto [it, fresh] = sync_of.try_emplace(config + " " + label, sync); !fresh && it->second != sync)
          throw std::runtime_error(config + " " + label + " measured with --sync " + it->second + " and " + sync +
                                   ": label the two apart");
        auto& by_label = r.data[{config, index, form, root, j.at("bytes").get<std::size_t>()}];
        const auto times = j.at("times").get<std::vector<double>>();
        auto pool = [&](Pooled& p) {
          p.times.insert(p.times.end(), times.begin(), times.end());
          p.ok = p.ok && j.at("verified").get<bool>();
          ++p.runs;
        };
        pool(by_label[label]);
        if (j.contains("beside")) pool(by_label[beside(label, j.at("beside").get<std::string>())]);
        r.np_of[config] = j.at("np").get<int>();
        remember(r.configs, config);
        remember(r.labels, label);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "mpi_collectives: %s:%d: not a result line (%s)\n", path.c_str(), line_no, e.what());
        return 2;
      }
    }
  }
  return 0;
}

// Columns: a label's min and median, then per other label the ratios
// baseline/label by min and by median; each at least as wide as its title.
std::string right(const std::string& text, std::size_t width) {
  return std::string(width > text.size() ? width - text.size() : 0, ' ') + text;
}
std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return std::string(buf);
}
std::size_t time_width(const std::string& label) { return std::max<std::size_t>(10, label.size() + 4); }
std::size_t ratio_width(const Columns& k, const std::string& label) { return k.base.size() + label.size() + 5; }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? std::string("none") : s;
}

// The table of one config, collective and root: a row per size; with `csv`,
// its rows there too. Whether every result in it verified.
bool print_table(const Results& r, const Columns& k, const std::string& config, int index, const std::string& form,
                 int root, const std::vector<std::size_t>& sizes, std::FILE* csv) {
  const Collective& c = kCollectives[index];
  const int np = r.np_of.at(config);
  bool all_ok = true;
  std::printf("\n== %s (np=%d): %s%s%s%s; times in us, min and median of the slowest rank over pooled repetitions\n",
              config.c_str(), np, c.function, form == "blocking" ? "" : (", " + form).c_str(),
              root >= 0 ? (", root " + std::to_string(root)).c_str() : "", c.data_text());
  std::string header = right("size", 10);
  for (const std::string& l : k.labels)
    header += " | " + right(l + " min", time_width(l)) + " " + right("median", 9) + " ";
  for (const std::string& l : k.others)
    header += " | " + right(k.base + "/" + l + " min", ratio_width(k, l)) + " " + right("median", 7);
  std::printf("%s | runs\n", header.c_str());
  std::map<std::string, std::vector<std::string>> below_1, below_1_5;  // per label: sizes that miss the target
  for (const std::size_t bytes : sizes) {
    const auto& by_label = r.data.at({config, index, form, root, bytes});
    std::string row = right(human(bytes), 10), runs;
    for (const std::string& l : k.labels) {
      auto it = by_label.find(l);
      if (it == by_label.end()) {
        row += " | " + right("-", time_width(l)) + " " + right("-", 9) + " ";
        runs += " -";
        continue;
      }
      const Pooled& p = it->second;
      all_ok = all_ok && p.ok;
      row += " | " + us(min_of(p.times), static_cast<int>(time_width(l))) + " " + us(median_of(p.times), 9) +
             (p.ok ? " " : "!");
      runs += ' ';  // (not " " + ...: GCC 12 warns -Wrestrict on literal + string at -O3)
      runs += std::to_string(p.runs);
    }
    for (const std::string& l : k.others) {
      const auto b = baseline_for(by_label, k.base, l);
      auto it = by_label.find(l);
      if (b == by_label.end() || it == by_label.end()) {
        row += " | " + right("-", ratio_width(k, l)) + " " + right("-", 7);
        continue;
      }
      const double by_min = min_of(b->second.times) / min_of(it->second.times);
      const double by_median = median_of(b->second.times) / median_of(it->second.times);
      row += " | " + right(fixed(by_min), ratio_width(k, l)) + " " + right(fixed(by_median), 7);
      if (std::min(by_min, by_median) < 1) below_1[l].push_back(human(bytes));
      if (bytes >= (16u << 10) && std::min(by_min, by_median) < 1.5) below_1_5[l].push_back(human(bytes));
    }
    std::printf("%s |%s\n", row.c_str(), runs.c_str());
    if (csv)
      for (const std::string& l : k.labels) {
        auto it = by_label.find(l);
        if (it == by_label.end()) continue;
        const Pooled& p = it->second;
        const auto b = baseline_for(by_label, k.base, l);
        std::fprintf(csv, "%s,%d,%s,%s,%zu,%s,%d,%zu,%s,%.9g,%.9g,", config.c_str(), np, c.name,
                     root >= 0 ? std::to_string(root).c_str() : "", bytes, l.c_str(), p.runs, p.times.size(),
                     p.ok ? "true" : "false", min_of(p.times), median_of(p.times));
        if (b == by_label.end())
          std::fprintf(csv, ",,%s\n", form.c_str());
        else
          std::fprintf(csv, "%.4f,%.4f,%s\n", min_of(b->second.times) / min_of(p.times),
                       median_of(b->second.times) / median_of(p.times), form.c_str());
      }
  }
  // The target for copse against the MPI library: at least as
  // fast at every size, at least 1.5x from 16 KiB, by min and by median.
  for (const std::string& l : k.others)
    std::printf("  %s/%s below 1 (min or median) at: %s; below 1.5 from 16 KiB at: %s\n", k.base.c_str(), l.c_str(),
                join(below_1[l]).c_str(), join(below_1_5[l]).c_str());
  return all_ok;
}

}  // namespace

std::string parse_report(int argc, char** argv, ReportOptions& o) {
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--report" || arg == "--stats") {
      auto& list = arg == "--report" ? o.files : o.stats;
      while (a + 1 < argc && std::strncmp(argv[a + 1], "--", 2) != 0) list.push_back(argv[++a]);
    } else if ((arg == "--baseline" || arg == "--csv") && a + 1 < argc) {
      (arg == "--csv" ? o.csv_path : o.baseline) = argv[++a];
    } else {
      return "unknown argument in report mode: " + arg;
    }
  }
  return o.files.empty() ? "--report needs at least one file" : "";
}

int run_report(const ReportOptions& o) {
  Results r;
  if (const int status = load_results(o.files, r); status != 0) return status;
  if (r.data.empty()) {
    std::fprintf(stderr, "mpi_collectives: no results in the report's files\n");
    return 1;
  }
  Columns k;
  k.labels = r.labels;
  k.base = o.baseline;
  if (k.base.empty())
    k.base = std::find(r.labels.begin(), r.labels.end(), "tuned") != r.labels.end() ? "tuned" : r.labels.front();
  if (std::find(r.labels.begin(), r.labels.end(), k.base) == r.labels.end()) {
    std::fprintf(stderr, "mpi_collectives: baseline '%s' is not a label of the results\n", k.base.c_str());
    return 2;
  }
  for (const std::string& l : r.labels)
    if (l != k.base) k.others.push_back(l);

  std::FILE* csv = nullptr;
  if (!o.csv_path.empty()) {
    if (!(csv = std::fopen(o.csv_path.c_str(), "w"))) {
      std::fprintf(stderr, "mpi_collectives: cannot write %s\n", o.csv_path.c_str());
      return 2;
    }
    std::fprintf(
        csv,
        "config,np,collective,root,bytes,label,runs,repetitions,verified,min_s,median_s,%s_over_min,%s_over_median,"
        "form\n",
        k.base.c_str(), k.base.c_str());
  }

  bool all_ok = true;
  for (const std::string& config : r.configs) {
    for (int index = 0; index < static_cast<int>(std::size(kCollectives)); ++index) {
      // Blocking first, then the others by name.
      std::map<std::pair<bool, std::string>, std::map<int, std::vector<std::size_t>>> sizes_of_root;
      for (const auto& [key, by_label] : r.data)
        if (std::get<0>(key) == config && std::get<1>(key) == index)
          sizes_of_root[{std::get<2>(key) != "blocking", std::get<2>(key)}][std::get<3>(key)].push_back(
              std::get<4>(key));
      for (const auto& [form, roots] : sizes_of_root)
        for (const auto& [root, sizes] : roots)
          all_ok = print_table(r, k, config, index, form.second, root, sizes, csv) && all_ok;
    }
  }
  std::printf("\n'!' marks a side whose result was wrong; runs: rounds pooled per label.\n");
  if (csv) std::fclose(csv);
  if (!o.stats.empty() && print_stats(o.stats) != 0) return 2;
  return all_ok ? 0 : 1;
}

}  // namespace mpi_collectives
