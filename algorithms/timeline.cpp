#include "algorithms/timeline.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"

namespace copse {

std::string_view to_string(Activity a) {
  switch (a) {
    case Activity::send: return "send";
    case Activity::recv: return "recv";
    case Activity::combine: return "combine";
    case Activity::local: return "local";
  }
  return "?";
}

void add_local_work(Timeline& out, int rank, std::uint64_t step, const Step& s, Picos from, Picos to) {
  if (to <= from) return;
  TimelineEvent e;
  e.rank = rank;
  e.step = step;
  e.start = from;
  e.end = to;
  if (s.recv && s.combine != Combine::replace && s.recv.count > 0) {
    e.activity = Activity::combine;
    e.peer = s.recv.peer;
    e.offset = s.recv.offset;
    e.count = s.recv.count;
  } else {
    e.activity = Activity::local;
    if (s.copy.count > 0) {
      e.offset = s.copy.to;
      e.count = s.copy.count;
    } else {
      e.peer = s.recv.peer;
      e.offset = s.recv.offset;
      e.count = s.recv.count;
    }
  }
  out.push_back(e);
}

namespace {

// ---- Gantt chart (SVG) ----------------------------------------------------------

// Tableau 10 and two more: distinguishable on screen and in print.
constexpr std::array<const char*, 12> kPalette = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                                                  "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#17becf", "#8c564b"};

std::string colour_of(int segment, int segments) {
  if (segments <= static_cast<int>(kPalette.size())) return kPalette[static_cast<std::size_t>(segment)];
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "hsl(%d,65%%,52%%)", segment * 300 / std::max(segments - 1, 1));
  return buffer;
}

std::string number(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", x);
  return buffer;
}

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A tick spacing of 1, 2 or 5 times a power of ten giving at most `most` ticks.
double tick_step(double span, int most) {
  const double raw = span / most;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) return m * power;
  return 10 * power;
}

struct Bar {
  double x0, x1;
  int segment;
  int events;
  const TimelineEvent* first;
};

std::string describe(const TimelineEvent& e) {
  std::string text = "rank " + std::to_string(e.rank) + " step " + std::to_string(e.step) + ": ";
  text += to_string(e.activity);
  if (e.peer >= 0)
    text += std::string(e.activity == Activity::send ? " to " : " from ") + "rank " + std::to_string(e.peer);
  text += ", elements [" + std::to_string(e.offset) + ", " + std::to_string(e.offset + e.count) + "), " +
          format_time(to_seconds(e.start)) + " - " + format_time(to_seconds(e.end));
  return text;
}

// The time axis under the rows: ticks at round times, 0 to `span` picoseconds.
void write_time_axis(std::ostream& out, double left, double width, double axis_y, double span) {
  const double step = tick_step(span, 10);
  out << "<g id=\"axis\"><line x1=\"" << number(left) << "\" x2=\"" << number(left + width) << "\" y1=\""
      << number(axis_y) << "\" y2=\"" << number(axis_y) << "\" stroke=\"black\"/>\n";
  for (double t = 0; t <= span * (1 + 1e-9); t += step) {
    const double x = left + t / span * width;
    out << "<line x1=\"" << number(x) << "\" x2=\"" << number(x) << "\" y1=\"" << number(axis_y) << "\" y2=\""
        << number(axis_y + 5) << "\" stroke=\"black\"/><text x=\"" << number(x) << "\" y=\"" << number(axis_y + 18)
        << "\" text-anchor=\"middle\">" << format_time(t * 1e-12) << "</text>\n";
  }
  out << "<text x=\"" << number(left + width / 2) << "\" y=\"" << number(axis_y + 34)
      << "\" text-anchor=\"middle\">virtual time</text></g>\n";
}

// At most 16 swatches: past 16 parts the colours are a gradient, shown by 16 of its steps.
int legend_swatches(int segments) { return std::min(segments, 16); }

// The legend under the axis: what a row's lanes are, and which colour is
// which part of the vector. `merged`: some bars stand for several events.
void write_gantt_legend(std::ostream& out, double left, double legend_y, int segments, bool merged) {
  const bool gradient = segments > 16;
  const int swatches = legend_swatches(segments);
  out << "<g id=\"legend\"><text x=\"" << number(left) << "\" y=\"" << number(legend_y - 6)
      << "\">Each row a rank: upper half sends, lower half receives, dark strip local work (combine, copy); "
      << "colour: " << (gradient ? "position in the vector, start to end" : "which part of the vector moves")
      << (merged ? "; bars closer than half a pixel merged" : "") << "</text>\n";
  for (int i = 0; i < swatches; ++i) {
    const double x = left + (i % 8) * 130, y = legend_y + (i / 8) * 22;
    const int segment = gradient ? i * (segments - 1) / (swatches - 1) : i;
    std::string label;
    if (gradient)
      label = i == 0 ? "vector start" : i == swatches - 1 ? "vector end" : "";
    else
      label = (segments == 1 ? std::string("whole vector")
                             : "part " + std::to_string(i + 1) + "/" + std::to_string(segments));
    out << "<rect class=\"swatch\" x=\"" << number(x) << "\" y=\"" << number(y + 4) << "\" width=\"14\" height=\"12\" "
        << "fill=\"" << colour_of(segment, segments) << "\"/><text x=\"" << number(x + 18) << "\" y=\""
        << number(y + 14) << "\">" << label << "</text>\n";
  }
  out << "</g>\n";
}

}  // namespace

void write_gantt_svg(std::ostream& out, const Timeline& timeline, int ranks, const GanttOptions& options) {
  const int rows = std::clamp(ranks, 1, std::max(options.max_rows, 1));
  const int segments = std::max(options.segments, 1);
  std::uint64_t n = options.vector_elements;
  Picos t_end = 0;
  for (const auto& e : timeline) {
    t_end = std::max(t_end, e.end);
    if (options.vector_elements == 0) n = std::max(n, e.offset + e.count);
  }
  n = std::max<std::uint64_t>(n, 1);
  const double span = static_cast<double>(std::max<Picos>(t_end, 1));

  constexpr double left = 90, right = 30, row_h = 18, gap = 3;
  const double width = std::max(options.width, 200);
  const double top = options.title.empty() ? 40 : 62;
  const double plot_h = rows * (row_h + gap);
  const double axis_y = top + plot_h + 4;
  const double legend_y = axis_y + 62;
  const double legend_rows = std::ceil(legend_swatches(segments) / 8.0);
  const double height = legend_y + 22 * legend_rows + 16;
  const auto x_of = [&](Picos t) { return left + static_cast<double>(t) / span * width; };
  const auto segment_of = [&](const TimelineEvent& e) {
    // By the middle of the region: a block of an equal partition gets its own index.
    const long double mid = static_cast<long double>(e.offset) + static_cast<long double>(e.count) / 2;
    return std::clamp(static_cast<int>(mid * segments / static_cast<long double>(n)), 0, segments - 1);
  };

  // Bars per (rank, lane), merged when they touch within half a pixel in the same colour.
  std::vector<std::array<std::vector<Bar>, 3>> lanes(static_cast<std::size_t>(rows));
  std::vector<const TimelineEvent*> sorted;
  for (const auto& e : timeline)
    if (e.rank >= 0 && e.rank < rows) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->start < b->start; });
  std::size_t bars = 0;
  for (const TimelineEvent* e : sorted) {
    const int lane = e->activity == Activity::send ? 0 : e->activity == Activity::recv ? 1 : 2;
    auto& list = lanes[static_cast<std::size_t>(e->rank)][static_cast<std::size_t>(lane)];
    const double x0 = x_of(e->start), x1 = x_of(e->end);
    const int segment = lane == 2 ? 0 : segment_of(*e);
    if (!list.empty() && list.back().segment == segment && x0 - list.back().x1 < 0.5) {
      list.back().x1 = std::max(list.back().x1, x1);
      ++list.back().events;
      continue;
    }
    list.push_back(Bar{x0, x1, segment, 1, e});
    ++bars;
  }
  const bool titles = bars <= 20000;

  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(left + width + right) << "\" height=\""
      << number(height) << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!options.title.empty())
    out << "<text x=\"" << number(left) << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" << escape(options.title)
        << "</text>\n";
  out << "<text x=\"" << number(left) << "\" y=\"" << number(top - 12) << "\" fill=\"#444\">virtual time "
      << format_time(to_seconds(t_end)) << "; " << ranks << (ranks == 1 ? " rank" : " ranks");
  if (rows < ranks) out << ", showing ranks 0-" << rows - 1 << " only (the first " << rows << ")";
  out << "</text>\n";

  // Rows: label, a light background, node boundaries.
  out << "<g id=\"rows\">\n";
  for (int r = 0; r < rows; ++r) {
    const double y = top + r * (row_h + gap);
    out << "<g class=\"rank\" id=\"rank-" << r << "\"><text x=\"" << number(left - 8) << "\" y=\""
        << number(y + row_h - 5) << "\" text-anchor=\"end\">rank " << r << "</text><rect x=\"" << number(left)
        << "\" y=\"" << number(y) << "\" width=\"" << number(width) << "\" height=\"" << number(row_h)
        << "\" fill=\"#f4f4f4\"/></g>\n";
    const auto node = [&](int q) { return options.node_of[static_cast<std::size_t>(q)]; };
    if (r > 0 && static_cast<int>(options.node_of.size()) > r && node(r) != node(r - 1))
      out << "<line x1=\"" << number(left - 60) << "\" x2=\"" << number(left + width) << "\" y1=\""
          << number(y - gap / 2) << "\" y2=\"" << number(y - gap / 2) << "\" stroke=\"#555\" stroke-width=\"1\"/>\n";
  }
  out << "</g>\n";

  // Bars.
  constexpr const char* kLaneClass[3] = {"send", "recv", "work"};
  const double lane_y[3] = {0, 7.5, 15}, lane_h[3] = {7.5, 7.5, 3};
  out << "<g id=\"bars\">\n";
  for (int r = 0; r < rows; ++r)
    for (int lane = 0; lane < 3; ++lane)
      for (const Bar& b : lanes[static_cast<std::size_t>(r)][static_cast<std::size_t>(lane)]) {
        const double y = top + r * (row_h + gap) + lane_y[lane];
        out << "<rect class=\"" << kLaneClass[lane] << "\" x=\"" << number(b.x0) << "\" y=\"" << number(y)
            << "\" width=\"" << number(std::max(b.x1 - b.x0, 0.6)) << "\" height=\"" << number(lane_h[lane])
            << "\" fill=\"" << (lane == 2 ? "#333" : colour_of(b.segment, segments)) << "\"";
        if (titles) {
          out << "><title>" << escape(describe(*b.first));
          if (b.events > 1) out << " (and " << b.events - 1 << " more merged)";
          out << "</title></rect>\n";
        } else {
          out << "/>\n";
        }
      }
  out << "</g>\n";

  write_time_axis(out, left, width, axis_y, span);

  write_gantt_legend(out, left, legend_y, segments, bars != sorted.size());
  out << "</svg>\n";
}

// ---- Chrome trace (JSON) --------------------------------------------------------

namespace {

// An exact decimal: `units` divided by 10^digits (picoseconds -> microseconds: 6).
std::string fixed(std::int64_t units, int digits) {
  std::int64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  const bool negative = units < 0;
  const std::uint64_t u = negative ? static_cast<std::uint64_t>(-units) : static_cast<std::uint64_t>(units);
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%s%llu.%0*llu", negative ? "-" : "",
                static_cast<unsigned long long>(u / static_cast<std::uint64_t>(scale)), digits,
                static_cast<unsigned long long>(u % static_cast<std::uint64_t>(scale)));
  return buffer;
}

std::string event_name(const TimelineEvent& e) {
  std::string name(to_string(e.activity));
  if (e.peer >= 0) name += std::string(e.activity == Activity::send ? " to " : " from ") + std::to_string(e.peer);
  name += " [" + std::to_string(e.offset) + "+" + std::to_string(e.count) + "]";
  return name;
}

int lane_of(Activity a) { return a == Activity::send ? 0 : a == Activity::recv ? 1 : 2; }

}  // namespace

void write_chrome_trace(std::ostream& out, const Timeline& timeline, int ranks, const TraceOptions& options) {
  bool has_wall = false;
  std::int64_t wall_origin = std::numeric_limits<std::int64_t>::max();
  for (const auto& e : timeline)
    if (e.wall_end_ns > 0) has_wall = true, wall_origin = std::min(wall_origin, e.wall_start_ns);
  const bool wall = options.wall && has_wall;

  // Per thread (tid = 3 rank + lane) in start order.
  std::vector<const TimelineEvent*> sorted;
  sorted.reserve(timeline.size());
  for (const auto& e : timeline) sorted.push_back(&e);
  auto key = [](const TimelineEvent* e) { return std::pair(e->rank * 3 + lane_of(e->activity), e->start); };
  std::stable_sort(sorted.begin(), sorted.end(), [&](auto* a, auto* b) { return key(a) < key(b); });

  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto begin = [&] {
    out << (first ? "" : ",\n");
    first = false;
  };
  const std::string suffix = options.name.empty() ? "" : ": " + options.name;
  const int pids = wall ? 2 : 1;
  for (int pid = 1; pid <= pids; ++pid) {
    begin();
    out << "{\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":" << pid << ",\"tid\":0,\"args\":{\"name\":"
        << json_string((pid == 1 ? "virtual time (cost model)" : "wall time (this machine)") + suffix) << "}}";
    begin();
    out << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"ts\":0,\"pid\":" << pid
        << ",\"tid\":0,\"args\":{\"sort_index\":" << pid << "}}";
    for (int r = 0; r < ranks; ++r)
      for (int lane = 0; lane < 3; ++lane) {
        constexpr const char* kLane[3] = {"send", "recv", "local work"};
        const int tid = 3 * r + lane;
        begin();
        out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":" << pid << ",\"tid\":" << tid
            << ",\"args\":{\"name\":\"rank " << r << " " << kLane[lane] << "\"}}";
        begin();
        out << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"ts\":0,\"pid\":" << pid << ",\"tid\":" << tid
            << ",\"args\":{\"sort_index\":" << tid << "}}";
      }
  }
  for (int pid = 1; pid <= pids; ++pid)
    for (const TimelineEvent* e : sorted) {
      const std::string ts = pid == 1 ? fixed(e->start, 6) : fixed(e->wall_start_ns - wall_origin, 3);
      const std::string dur = pid == 1 ? fixed(e->end - e->start, 6) : fixed(e->wall_end_ns - e->wall_start_ns, 3);
      begin();
      out << "{\"name\":" << json_string(event_name(*e)) << ",\"cat\":\"" << to_string(e->activity)
          << "\",\"ph\":\"X\",\"ts\":" << ts << ",\"dur\":" << dur << ",\"pid\":" << pid
          << ",\"tid\":" << 3 * e->rank + lane_of(e->activity) << ",\"args\":{\"rank\":" << e->rank
          << ",\"step\":" << e->step << ",\"peer\":" << e->peer << ",\"offset\":" << e->offset
          << ",\"count\":" << e->count << ",\"start_ps\":" << e->start << ",\"end_ps\":" << e->end << "}}";
    }
  out << "\n]}\n";
}

void write_picture_file(std::string_view option, const std::string& path,
                        const std::function<void(std::ostream&)>& write) {
  std::ofstream file(path);
  if (!file) throw UsageError(std::string(option) + ": cannot write " + path);
  write(file);
  file.close();
  if (!file) throw SystemError(std::string(option) + ": writing " + path + " failed");
}

}  // namespace copse
