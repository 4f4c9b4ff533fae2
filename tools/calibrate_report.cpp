#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"
#include "common/units.hpp"
#include "tools/calibrate.hpp"

// What `copse calibrate` writes: the model file (tools/calibrate.hpp's
// write_model_file) and the reports; the measurements are tools/calibrate.cpp's.

namespace copse {

// ---- the model file --------------------------------------------------------------------

namespace {

std::string fixed(double value, int decimals, const char* unit) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f%s", decimals, value, unit);
  return text;
}
std::string as_ns(double seconds) { return fixed(seconds * 1e9, 1, "ns"); }
std::string as_ps(double seconds) { return fixed(seconds * 1e12, 3, "ps"); }
std::string percent(double fraction) { return fixed(fraction * 100, 1, " %"); }

std::string level_note(const LevelResult& level) {
  return level.level + " (" + level.description + "), " + level.link + ", ping-pong fit, residual " +
         percent(level.ping_pong.fit.residual);
}

double gamma_of(const Calibration& calibration) {
  std::vector<double> gammas;
  for (const auto& g : calibration.gamma) gammas.push_back(g.sweep.fit.beta);
  return spread_of(gammas).median;
}

constexpr std::string_view kHeader = "# copse calibrate";

}  // namespace

std::vector<ModelEntry> model_entries(const Calibration& calibration) {
  std::vector<ModelEntry> entries;
  for (const LevelResult& level : calibration.levels) {
    if (level.role.empty()) continue;
    const std::string note = level_note(level);
    if (level.role == "group")
      entries.push_back({"group_size", std::to_string(level.group_size), "cores sharing the " + level.level, {}});
    entries.push_back({level.role + "_alpha", as_ns(level.ping_pong.fit.alpha), note, {}});
    entries.push_back({level.role + "_beta", as_ps(level.ping_pong.fit.beta), note, {}});
  }
  // What the figures mean: half a round trip of copse's rendezvous links,
  // everything a message costs (under LogGP, alpha would be L alone and the
  // overheads o would come on top).
  if (!entries.empty())
    entries.push_back({"timing", "hockney", "alpha and beta are whole messages: n bytes take alpha + beta * n", {}});
  if (!calibration.gamma.empty()) {
    ModelEntry gamma{"gamma",
                     as_ps(gamma_of(calibration)),
                     "median over " + std::to_string(calibration.gamma.size()) + " reduction kernels",
                     {}};
    for (const auto& g : calibration.gamma)
      gamma.details.push_back(g.op + " " + g.dtype + ": " + as_ps(g.sweep.fit.beta) + " per byte (residual " +
                              percent(g.sweep.fit.residual) + ")");
    entries.push_back(std::move(gamma));
  }
  return entries;
}

void check_model_file(const std::string& path) {
  if (path.empty()) throw UsageError("--output: an empty file name");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || !line.starts_with(kHeader))
    throw UsageError("--output " + path + ": the file exists and was not written by copse calibrate; remove it or " +
                     "choose another file");
}

void write_model_file(const std::string& path, const Calibration& calibration) {
  check_model_file(path);
  const std::vector<ModelEntry> entries = model_entries(calibration);
  // A previous calibration's file: keep each key block (the key's line and
  // its detail comments) that this run does not replace.
  std::vector<std::pair<std::string, std::string>> kept;  // key, block
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // the header, checked above
    while (std::getline(in, line)) {
      const auto eq = line.find(" = ");
      const std::string key = line.substr(0, eq);
      if (eq != std::string::npos && !key.empty() &&
          key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos)
        kept.emplace_back(key, line + "\n");
      else if (line.starts_with("#   ") && !kept.empty())
        kept.back().second += line + "\n";
    }
  }
  std::ostringstream out;
  out << kHeader << ": the cost model measured here; alpha and beta per level by ping-pong over copse's links\n"
      << "# (copse calibrate, and copse_calibrate_mpi under mpirun), gamma over the reduction kernels.\n"
      << "# Use it with --config FILE or COPSE_CONFIG=FILE.\n"
      << "[model]\n";
  for (const ModelEntry& entry : entries) {
    out << entry.key << " = " << (entry.key == "group_size" ? entry.value : "\"" + entry.value + "\"") << "  # "
        << entry.note << "\n";
    for (const auto& detail : entry.details) out << "#   " << detail << "\n";
  }
  for (const auto& [key, block] : kept)
    if (std::none_of(entries.begin(), entries.end(), [&](const ModelEntry& e) { return e.key == key; })) out << block;
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << out.str();
    file.close();
    if (!file) throw SystemError("cannot write " + temporary + ": " + std::strerror(errno));
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw SystemError("cannot write " + path + ": " + ec.message());
}

// ---- reports ---------------------------------------------------------------------------

namespace {

std::string per_byte(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f ps/B", seconds * 1e12);
  std::string s = text;
  if (seconds > 0) {
    std::snprintf(text, sizeof text, " (%.2f GB/s)", 1e-9 / seconds);
    s += text;
  }
  return s;
}

std::string spread_text(const Spread& s, std::string (*format)(double)) {
  return "min " + format(s.min) + ", median " + format(s.median) + ", max " + format(s.max);
}

// A table cell: `text` in `width` columns, left or right aligned.
struct Cell {
  std::string text;
  int width;
  bool right = false;
};
std::ostream& operator<<(std::ostream& out, const Cell& cell) {
  return out << (cell.right ? std::right : std::left) << std::setw(cell.width) << cell.text << std::left;
}

std::string time_text(double seconds) { return format_time(seconds); }
std::string byte_text(double seconds) { return fixed(seconds * 1e12, 2, " ps/B"); }

void write_sweep_fit(std::ostream& out, const char* what, const Sweep& sweep, const char* alpha_name) {
  out << "  " << what << ": " << alpha_name << " " << format_time(sweep.fit.alpha) << " ("
      << spread_text(sweep.alpha, time_text) << "), beta " << per_byte(sweep.fit.beta) << " ("
      << spread_text(sweep.beta, byte_text) << "), residual " << percent(sweep.fit.residual)
      << (sweep.fit.clamped ? " (a coefficient clamped at 0)" : "") << "\n";
}

}  // namespace

std::string format_report(const Calibration& calibration, const std::string& output) {
  std::ostringstream out;
  const CalibrateOptions& o = calibration.options;
  out << "copse calibrate: " << calibration.machine << ", " << o.repetitions << " repetitions"
      << (o.quick ? " (quick)" : "") << "\n";
  out << "Times per message (ping-pong: half a round trip; stream: back to back), min / median / max over the\n"
         "repetitions. Fits (alpha + beta * size) by least squares on relative errors over each size's fastest\n"
         "repetition; in parentheses the fits of each repetition alone; residual: rms relative error of the fit.\n";
  for (const LevelResult& level : calibration.levels) {
    out << "\nlevel " << level.level << ": " << level.description << "; " << level.pair << ", " << level.link;
    if (!level.role.empty()) out << " -> model " << level.role;
    out << "\n";
    out << "  " << Cell{"size", 10} << Cell{"ping-pong min", 15, true} << Cell{"median", 11, true}
        << Cell{"max", 11, true} << Cell{"fit", 11, true} << Cell{"stream min", 13, true} << Cell{"median", 11, true}
        << Cell{"max", 11, true} << "\n";
    for (std::size_t s = 0; s < level.ping_pong.bytes.size(); ++s) {
      const Spread pp = spread_of(level.ping_pong.seconds[s]), st = spread_of(level.stream.seconds[s]);
      const double fit =
          level.ping_pong.fit.alpha + level.ping_pong.fit.beta * static_cast<double>(level.ping_pong.bytes[s]);
      out << "  " << Cell{format_bytes(level.ping_pong.bytes[s]), 10} << Cell{format_time(pp.min), 15, true}
          << Cell{format_time(pp.median), 11, true} << Cell{format_time(pp.max), 11, true}
          << Cell{format_time(fit), 11, true} << Cell{format_time(st.min), 13, true}
          << Cell{format_time(st.median), 11, true} << Cell{format_time(st.max), 11, true} << "\n";
    }
    write_sweep_fit(out, "ping-pong", level.ping_pong, "alpha");
    write_sweep_fit(out, "stream   ", level.stream, "alpha");
  }
  for (const auto& line : calibration.skipped) out << "\nnot measured: " << line;
  if (!calibration.skipped.empty()) out << "\n";
  if (!calibration.gamma.empty()) {
    out << "\ngamma: time per combined byte of the reduction kernels, "
        << format_bytes(calibration.gamma.front().sweep.bytes.front()) << " to "
        << format_bytes(calibration.gamma.front().sweep.bytes.back()) << "\n";
    out << "  " << Cell{"op", 6} << Cell{"type", 8} << Cell{"gamma", 12, true} << Cell{"min", 12, true}
        << Cell{"median", 12, true} << Cell{"max", 12, true} << Cell{"GB/s", 8, true} << Cell{"residual", 10, true}
        << Cell{"per call", 11, true} << "\n";
    for (const GammaResult& g : calibration.gamma) {
      const Sweep& s = g.sweep;
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f", s.fit.beta > 0 ? 1e-9 / s.fit.beta : 0.0);
      out << "  " << Cell{g.op, 6} << Cell{g.dtype, 8} << Cell{byte_text(s.fit.beta), 12, true}
          << Cell{byte_text(s.beta.min), 12, true} << Cell{byte_text(s.beta.median), 12, true}
          << Cell{byte_text(s.beta.max), 12, true} << Cell{rate, 8, true} << Cell{percent(s.fit.residual), 10, true}
          << Cell{format_time(s.fit.alpha), 11, true} << "\n";
    }
  }
  out << "\nmodel file " << output << ":\n";
  for (const ModelEntry& entry : model_entries(calibration))
    out << "  " << Cell{entry.key, 12} << " = " << Cell{entry.value, 12} << "  " << entry.note << "\n";
  return out.str();
}

std::string clamp_warnings(const Calibration& calibration) {
  std::string text;
  for (const LevelResult& l : calibration.levels)
    if (l.ping_pong.fit.clamped)
      text += "copse calibrate: warning: the ping-pong fit of level " + l.level + " (" + l.pair + ") has " +
              (l.ping_pong.fit.beta == 0 ? "beta" : "alpha") +
              " 0: its times do not grow with the size as alpha + beta * bytes (a busy machine?); "
              "measure again on an idle one\n";
  return text;
}

std::string report_json(const Calibration& calibration, const std::string& output) {
  using Json = nlohmann::ordered_json;
  const auto spread = [](const Spread& s) { return Json{{"min", s.min}, {"median", s.median}, {"max", s.max}}; };
  const auto sweep = [&](const Sweep& s) {
    Json sizes = Json::array();
    for (std::size_t i = 0; i < s.bytes.size(); ++i) {
      const Spread t = spread_of(s.seconds[i]);
      sizes.push_back({{"bytes", s.bytes[i]}, {"min", t.min}, {"median", t.median}, {"max", t.max}});
    }
    return Json{{"alpha", s.fit.alpha},
                {"beta", s.fit.beta},
                {"residual", s.fit.residual},
                {"clamped", s.fit.clamped},
                {"alpha_spread", spread(s.alpha)},
                {"beta_spread", spread(s.beta)},
                {"sizes", std::move(sizes)}};
  };
  Json levels = Json::array();
  for (const LevelResult& l : calibration.levels) {
    Json level{{"level", l.level},
               {"description", l.description},
               {"pair", l.pair},
               {"link", l.link},
               {"role", l.role.empty() ? Json(nullptr) : Json(l.role)},
               {"ping_pong", sweep(l.ping_pong)},
               {"stream", sweep(l.stream)}};
    if (l.role == "group") level["group_size"] = l.group_size;
    levels.push_back(std::move(level));
  }
  Json gamma = Json::array();
  for (const GammaResult& g : calibration.gamma) {
    const Sweep& s = g.sweep;
    gamma.push_back({{"op", g.op},
                     {"dtype", g.dtype},
                     {"gamma", s.fit.beta},
                     {"gamma_spread", spread(s.beta)},
                     {"per_call", s.fit.alpha},
                     {"residual", s.fit.residual}});
  }
  Json model = Json::object();
  for (const ModelEntry& entry : model_entries(calibration)) {
    if (entry.key == "group_size")
      model[entry.key] = {{"text", entry.value}, {"value", std::stoi(entry.value)}};
    else if (entry.key == "timing")
      model[entry.key] = {{"text", entry.value}, {"value", entry.value}};
    else
      model[entry.key] = {{"text", entry.value}, {"value", parse_time(entry.value)}};
  }
  const CalibrateOptions& o = calibration.options;
  return Json{{"machine", calibration.machine},
              {"repetitions", o.repetitions},
              {"max_bytes", o.max_bytes},
              {"quick", o.quick},
              {"levels", std::move(levels)},
              {"not_measured", calibration.skipped},
              {"gamma", std::move(gamma)},
              {"model", std::move(model)},
              {"output", output}}
      .dump(2);
}

}  // namespace copse
