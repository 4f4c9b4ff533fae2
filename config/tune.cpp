#include "config/tune.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <istream>
#include <set>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse {

namespace {

// The collectives in the order their rows are written (MpiCollective's).
std::optional<MpiCollective> mpi_collective_named(std::string_view name) {
  for (MpiCollective c : kMpiCollectives)
    if (name == to_string(c)) return c;
  return std::nullopt;
}

// A whole number of the name: "np4" -> 4 after the prefix; -1 if not one.
int tune_number(std::string_view text) {
  int n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  return error == std::errc() && end == text.data() + text.size() && n >= 1 && text[0] != '0' ? n : -1;
}

std::uint64_t integer_sqrt(std::uint64_t n) {
  auto r = static_cast<std::uint64_t>(std::sqrt(static_cast<double>(n)));
  while (r * r > n) --r;
  while ((r + 1) * (r + 1) <= n) ++r;
  return r;
}

// The rank, node and host ranges of each shape (the header's "Shapes" rule).
// Three kinds of shape are measured apart, each covering its own calls: one
// node, virtual nodes of one host (max_hosts 1), and several hosts
// (min_hosts 2; a host's ranks may be virtual nodes too). Within a
// kind a shape covers its rank count up to the next measured one.
struct TuneCover {
  int min_ranks, max_ranks, min_nodes, max_nodes, min_hosts, max_hosts;
};

std::map<std::string, TuneCover> covers(const std::set<std::string>& names) {
  constexpr int none = std::numeric_limits<int>::max();
  enum Kind { one_node, virtual_nodes, hosts, kinds };
  std::vector<std::pair<int, std::string>> groups[kinds];
  for (const std::string& name : names) {
    const TuneShape s = parse_tune_shape(name);
    groups[s.hosts > 1 ? hosts : s.multi_node() ? virtual_nodes : one_node].emplace_back(s.ranks, name);
  }
  std::map<std::string, TuneCover> out;
  for (int kind = 0; kind < kinds; ++kind) {
    auto& group = groups[kind];
    std::sort(group.begin(), group.end());
    for (std::size_t i = 0; i < group.size(); ++i)
      out[group[i].second] = {i == 0 ? 2 : group[i].first, i + 1 < group.size() ? group[i + 1].first - 1 : none,
                              kind == one_node ? 1 : 2,    kind == one_node ? 1 : none,
                              kind == hosts ? 2 : 0,       kind == virtual_nodes ? 1 : none};
  }
  return out;
}

std::string ratio_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", x);
  return text;
}

// Every size's ratios, one median per variant: barrier's one band.
TuneRatio median_ratio(const TuneSizes& measured) {
  std::vector<double> configured;
  std::map<TuneVariant, std::vector<double>> variants;
  for (const auto& [bytes, r] : measured) {
    if (r.configured > 0) configured.push_back(r.configured);
    for (const auto& [variant, x] : r.variants) variants[variant].push_back(x);
  }
  TuneRatio out{median(configured), {}};
  for (const auto& [variant, xs] : variants) out.variants[variant] = median(xs);
  return out;
}

// One collective's rows at one shape: bands by geometric mean, each in its
// chosen variant (hierarchy form, block count), a lone band within the noise
// following its neighbours, adjacent bands that decide alike merged (the
// header's "Sizes", "Hierarchy forms and block counts", "Noise" and
// "Barrier" rules).
std::vector<DecisionRow> collective_rows(const TuneSizes& measured, bool barrier, double threshold, double noise) {
  struct Band {
    std::uint64_t lo, hi;
    std::vector<double> ratios;
    std::optional<TuneVariant> variant;
    std::vector<double> configured;  // copse's as configured, when a variant was chosen
  };
  const auto band = [noise](std::uint64_t lo, std::uint64_t hi, const TuneRatio& r) {
    const auto [variant, x] = r.chosen(noise);
    return Band{lo, hi, {x}, variant, variant ? std::vector<double>{r.configured} : std::vector<double>{}};
  };
  std::vector<Band> bands;
  if (barrier) {
    bands.push_back(band(0, std::numeric_limits<std::uint64_t>::max(), median_ratio(measured)));
  } else {
    std::uint64_t previous = 0;
    for (auto it = measured.begin(); it != measured.end(); ++it) {
      const auto next = std::next(it);
      bands.push_back(band(
          it == measured.begin() ? 0 : integer_sqrt(previous * it->first) + 1,
          next == measured.end() ? std::numeric_limits<std::uint64_t>::max() : integer_sqrt(it->first * next->first),
          it->second));
      previous = it->first;
    }
  }
  // Each band's own decision, then the noise rule: a band between two that
  // decide alike, its ratio within the noise of the threshold, decides as
  // they do (worked: ratios 1.04, 0.94, 2.07 at threshold 0.95 and noise
  // 0.8 serve all three bands -- 0.94 lies in [0.76, 1.19) -- while 1.04,
  // 0.54, 2.07 defer the middle one).
  const auto serves = [&](double ratio) { return ratio >= threshold; };
  std::vector<Provider> decided;
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const double x = bands[i].ratios.front();
    bool copse = serves(x);
    if (i > 0 && i + 1 < bands.size() && x >= threshold * noise && x < threshold / noise) {
      const bool before = serves(bands[i - 1].ratios.front()), after = serves(bands[i + 1].ratios.front());
      if (before == after) copse = before;
    }
    decided.push_back(copse ? Provider::copse : Provider::mpi);
  }
  // A deferred band names no variant: the library runs it.
  for (std::size_t i = 0; i < bands.size(); ++i)
    if (decided[i] == Provider::mpi) bands[i].variant.reset(), bands[i].configured.clear();
  std::vector<DecisionRow> rows;
  std::vector<Band> merged;  // each row's ratios
  for (std::size_t i = 0; i < bands.size(); ++i) {
    const Band& b = bands[i];
    const Provider use = decided[i];
    if (!rows.empty() && rows.back().use == use && merged.back().variant == b.variant) {
      rows.back().max_bytes = b.hi;
      merged.back().ratios.push_back(b.ratios.front());
      merged.back().configured.insert(merged.back().configured.end(), b.configured.begin(), b.configured.end());
      continue;
    }
    DecisionRow r;
    r.min_bytes = b.lo;
    r.max_bytes = b.hi;
    r.use = use;
    if (b.variant) r.hierarchy = b.variant->form, r.blocks = b.variant->blocks;
    rows.push_back(r);
    merged.push_back(b);
  }
  const auto shown = [](const std::vector<double>& xs) {
    std::vector<std::string> out;
    for (double x : xs) out.push_back(ratio_text(x));
    return join(out, ", ");
  };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::optional<TuneVariant>& v = merged[i].variant;
    rows[i].note = "tuned/copse " + shown(merged[i].ratios) + " by median";
    if (v)
      rows[i].note += " " + v->text() + (v->blocks ? " (as configured: " : " (the configured form: ") +
                      shown(merged[i].configured) + ")";
  }
  return rows;
}

// Where a form's rows come from (the header's "Forms" rule): its own ratios,
// or another form's at a threshold, with what the note adds.
struct FormSource {
  const TuneSizes* sizes = nullptr;  // none: the form gets no rows
  double threshold = 0;
  std::string says;
};

FormSource form_source(const std::map<CallForm, TuneSizes>& measured, CallForm form, double threshold,
                       double unmeasured) {
  if (const auto it = measured.find(form); it != measured.end()) return {&it->second, threshold, ""};
  const auto nonblocking = measured.find(CallForm::nonblocking);
  if (form == CallForm::persistent && nonblocking != measured.end())
    return {&nonblocking->second, threshold, "; persistent not measured: nonblocking's"};
  const auto blocking = measured.find(CallForm::blocking);
  if (form == CallForm::blocking || blocking == measured.end()) return {};
  char says[128];
  std::snprintf(says, sizeof says, "; %s not measured: the blocking call's, copse from %.3g", to_string(form).data(),
                threshold * unmeasured);
  return {&blocking->second, threshold * unmeasured, says};
}

// The rows of one measured shape, in collective order, each collective's by
// form; reduce_scatter repeats reduce_scatter_block's when it was not
// measured itself.
std::vector<DecisionRow> shape_rows(const std::string& shape,
                                    const std::map<MpiCollective, std::map<CallForm, TuneSizes>>& measured,
                                    double threshold, double noise, double unmeasured) {
  std::vector<DecisionRow> out;
  const auto add = [&](MpiCollective c, const std::map<CallForm, TuneSizes>& forms, const char* mirror) {
    for (CallForm form : kCallForms) {
      const FormSource from = form_source(forms, form, threshold, unmeasured);
      if (!from.sizes) continue;
      for (DecisionRow r : collective_rows(*from.sizes, c == MpiCollective::barrier, from.threshold, noise)) {
        r.collective = c;
        r.form = form;
        r.note = shape + ": " + r.note + mirror + from.says;
        r.shape = shape;
        out.push_back(std::move(r));
      }
    }
  };
  for (MpiCollective c : kMpiCollectives) {
    if (const auto it = measured.find(c); it != measured.end())
      add(c, it->second, "");
    else if (const auto block = measured.find(MpiCollective::reduce_scatter_block);
             c == MpiCollective::reduce_scatter && block != measured.end())
      add(c, block->second, " (reduce_scatter_block's)");
  }
  return out;
}

}  // namespace

std::string TuneVariant::label() const {
  std::string text = "copse";
  if (form) text += "-" + std::string(to_string(*form));
  if (blocks) text += "-b" + std::to_string(blocks);
  return text;
}

std::string TuneVariant::text() const {
  std::string out = form ? "in " + std::string(to_string(*form)) : "";
  if (blocks)
    out += std::string(form ? " " : "") + "with " + std::to_string(blocks) + (blocks == 1 ? " block" : " blocks");
  return out;
}

std::optional<TuneVariant> tune_variant_of(std::string_view label) {
  if (label == "copse") return std::nullopt;
  if (!label.starts_with("copse-")) throw UsageError("not a copse label (copse or copse-...)");
  std::string_view rest = label.substr(6);
  TuneVariant v;
  // A trailing "bN" (alone or after the form: "b16", "lanes-b16").
  const std::size_t dash = rest.rfind('-');
  const std::string_view last = dash == std::string_view::npos ? rest : rest.substr(dash + 1);
  if (last.size() > 1 && last[0] == 'b' && last.find_first_not_of("0123456789", 1) == std::string_view::npos) {
    v.blocks = tune_number(last.substr(1));
    if (v.blocks < 1) throw UsageError("block count '" + std::string(last.substr(1)) + "' is not a whole number >= 1");
    rest = dash == std::string_view::npos ? std::string_view() : rest.substr(0, dash);
  }
  if (!rest.empty()) v.form = parse_form(rest);
  if (!v.form && !v.blocks) throw UsageError("names neither a hierarchy form nor a block count (copse-FORM, copse-bN)");
  return v;
}

std::pair<std::optional<TuneVariant>, double> TuneRatio::chosen(double noise) const {
  // Worked, noise 0.8: configured 0.57, lanes 1.69, auto 1.60: lanes (1.69 >
  // 0.57 / 0.8; auto is not above 1.69 / 0.8); configured 0.60, lanes 0.90,
  // auto 1.40: auto (1.40 > 0.90 / 0.8).
  std::pair<std::optional<TuneVariant>, double> choice{std::nullopt, configured};
  for (const auto& [variant, x] : variants)  // in TuneVariant's order
    if (x > choice.second / noise) choice = {variant, x};
  return choice;
}

double TuneRatio::best() const {
  double x = configured;
  for (const auto& [variant, r] : variants) x = std::max(x, r);
  return x;
}

TuneShape parse_tune_shape(std::string_view name) {
  TuneShape s;
  s.name = std::string(name);
  const auto bad = [&] {
    return UsageError("shape '" + s.name +
                      "': expected npP (P processes on one node), npP-vnK (on virtual nodes of K) or npP-hN (on N "
                      "hosts), P, K and N whole numbers >= 1");
  };
  if (!name.starts_with("np")) throw bad();
  const std::size_t dash = name.find('-');
  s.ranks = tune_number(name.substr(2, dash == std::string_view::npos ? name.npos : dash - 2));
  if (s.ranks < 1) throw bad();
  if (dash == std::string_view::npos) return s;
  const std::string_view rest = name.substr(dash + 1);
  if (rest.starts_with("vn"))
    s.ranks_per_node = tune_number(rest.substr(2));
  else if (rest.starts_with("h"))
    s.hosts = tune_number(rest.substr(1));
  else
    throw bad();
  if (s.ranks_per_node < 0 || s.hosts < 1) throw bad();
  return s;
}

TuneRatios read_tune_csv(std::istream& in, const std::string& source) {
  std::string line;
  int number = 1;
  const auto fail = [&](const std::string& reason) {
    return UsageError("measurements " + source + ", line " + std::to_string(number) + ": " + reason);
  };
  if (!std::getline(in, line)) throw UsageError("measurements " + source + ": empty (expected a header line)");
  const std::vector<std::string> header = split(line, ',');
  const auto column = [&](std::string_view name) -> std::size_t {
    const auto it = std::find_if(header.begin(), header.end(), [&](const std::string& h) {
      return name.starts_with('_') ? h.ends_with(name) : h == name;
    });
    if (it == header.end())
      throw fail("no column " + std::string(name.starts_with('_') ? "*" : "") + std::string(name) +
                 " (expected the CSV of mpi_collectives --report --csv)");
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t config = column("config"), collective = column("collective"), root = column("root"),
                    bytes = column("bytes"), label = column("label"), verified = column("verified"),
                    ratio = column("_over_median");
  // Optional: a CSV from before the forms measured the blocking calls.
  const std::size_t form = static_cast<std::size_t>(std::find(header.begin(), header.end(), "form") - header.begin());
  TuneRatios out;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const std::vector<std::string> f = split(line, ',');
    if (f.size() != header.size())
      throw fail(std::to_string(f.size()) + " fields, the header has " + std::to_string(header.size()));
    const auto call_form = form < f.size() ? call_form_named(f[form]) : CallForm::blocking;
    if (!call_form) throw fail("unknown form '" + f[form] + "' (blocking, nonblocking or persistent)");
    // "copse", or "copse-...": copse planning in a variant (TuneVariant::label).
    if ((f[label] != "copse" && !f[label].starts_with("copse-")) || !(f[root].empty() || f[root] == "0")) continue;
    std::optional<TuneVariant> variant;
    try {
      variant = tune_variant_of(f[label]);
    } catch (const UsageError& e) {
      throw fail("label '" + f[label] + "': " + e.what());
    }
    if (f[verified] != "true")
      throw RunFailure("measurements " + source + ", line " + std::to_string(number) + ": " + f[config] + " " +
                       f[collective] + (form < f.size() && f[form] != "blocking" ? " " + f[form] : "") + " " +
                       f[bytes] + " B was not verified (a wrong result)");
    if (f[ratio].empty()) continue;  // no baseline measured beside it
    const auto c = mpi_collective_named(f[collective]);
    if (!c) throw fail("unknown collective '" + f[collective] + "'");
    parse_tune_shape(f[config]);  // named in the shape's own error
    std::uint64_t n = 0;
    double r = 0;
    const auto [bytes_end, bytes_error] = std::from_chars(f[bytes].data(), f[bytes].data() + f[bytes].size(), n);
    if (bytes_error != std::errc() || bytes_end != f[bytes].data() + f[bytes].size())
      throw fail("bytes '" + f[bytes] + "' is not a whole number");
    const auto [ratio_end, ratio_error] = std::from_chars(f[ratio].data(), f[ratio].data() + f[ratio].size(), r);
    if (ratio_error != std::errc() || ratio_end != f[ratio].data() + f[ratio].size() || !(r > 0) || !std::isfinite(r))
      throw fail("ratio '" + f[ratio] + "' is not a positive number");
    TuneRatio& cell = out[f[config]][*c][*call_form][n];
    (variant ? cell.variants[*variant] : cell.configured) = r;
  }
  if (out.empty()) throw UsageError("measurements " + source + ": no copse rows with ratios");
  return out;
}

DecisionTable tune_table(const TuneRatios& ratios, double threshold, double noise,
                         const std::optional<DecisionTable>& previous, double unmeasured) {
  DecisionTable table;
  std::set<std::string> shapes;
  std::map<std::string, std::vector<DecisionRow>> kept;  // the previous table's, by shape
  if (previous) {
    table.fallback = previous->fallback;
    for (const DecisionRow& r : previous->rows) {
      if (r.shape.empty()) {
        table.rows.push_back(r);
      } else if (!ratios.contains(r.shape)) {
        try {
          parse_tune_shape(r.shape);
        } catch (const UsageError& e) {
          throw UsageError("decision table " + previous->source + ", line " + std::to_string(r.line) + ": " + e.what());
        }
        shapes.insert(r.shape);
        kept[r.shape].push_back(r);
      }
    }
  }
  for (const auto& [shape, measured] : ratios) shapes.insert(shape);
  const std::map<std::string, TuneCover> cover = covers(shapes);
  for (const std::string& shape : shapes) {
    const auto measured = ratios.find(shape);
    std::vector<DecisionRow> rows =
        measured != ratios.end() ? shape_rows(shape, measured->second, threshold, noise, unmeasured) : kept.at(shape);
    const TuneCover& c = cover.at(shape);
    for (DecisionRow& r : rows) {
      r.min_ranks = c.min_ranks, r.max_ranks = c.max_ranks, r.min_nodes = c.min_nodes, r.max_nodes = c.max_nodes;
      r.min_hosts = c.min_hosts, r.max_hosts = c.max_hosts;
      r.line = 0;
      table.rows.push_back(std::move(r));
    }
  }
  return table;
}

std::map<std::string, TuneRefinement> tune_refinements(const TuneRatios& ratios, double threshold) {
  std::map<std::string, TuneRefinement> out;
  for (const auto& [shape, by_collective] : ratios)
    for (const auto& [collective, by_form] : by_collective)
      for (const auto& [form, measured] : by_form) {
        if (collective == MpiCollective::barrier) continue;  // one band: no edge to move
        for (auto it = measured.begin(); it != measured.end() && std::next(it) != measured.end(); ++it) {
          const auto next = std::next(it);
          if ((it->second.best() >= threshold) == (next->second.best() >= threshold)) continue;
          // The band edge (integer_sqrt of the two, as collective_rows draws
          // it), as whole floats; none when the two sizes are that close.
          const std::uint64_t middle = integer_sqrt(it->first * next->first) / 4 * 4;
          if (middle <= it->first) continue;
          TuneRefinement& r = out[shape];
          r.collectives.insert(collective);
          r.sizes.insert(middle);
        }
      }
  return out;
}

void merge_tune_ratios(TuneRatios& into, const TuneRatios& from) {
  for (const auto& [shape, by_collective] : from)
    for (const auto& [collective, by_form] : by_collective)
      for (const auto& [form, measured] : by_form)
        for (const auto& [bytes, ratio] : measured) {
          TuneRatio& cell = into[shape][collective][form][bytes];
          if (ratio.configured > 0) cell.configured = ratio.configured;
          for (const auto& [variant, x] : ratio.variants) cell.variants[variant] = x;
        }
}

}  // namespace copse
