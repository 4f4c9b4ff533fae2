#include "tools/study_support.hpp"

#include <tbb/parallel_for.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>

#include "common/error.hpp"

namespace copse {

void for_each_point(std::size_t count, const std::function<void(std::size_t)>& run, const ProgressCallback& progress,
                    bool parallel) {
  std::atomic<std::size_t> done{0};
  if (progress) progress(0, count);  // the total at once, before the first point ends
  const auto point = [&](std::size_t i) {
    run(i);
    if (progress) progress(++done, count);
  };
  if (!parallel) {
    for (std::size_t i = 0; i < count; ++i) point(i);
    return;
  }
  // oneTBB spreads the points over the cores and, when one throws, cancels
  // the rest and rethrows that exception here.
  tbb::parallel_for(std::size_t{0}, count, point);
}

namespace study_support {

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();  // complete before gnuplot reads it
  if (!out) throw SystemError("cannot write " + path.string());
}

}  // namespace study_support

StudyPlot render_gnuplot(const std::filesystem::path& dir, const std::string& name, const std::string& data,
                         const std::string& script) {
  StudyPlot plot;
  plot.data = dir / (name + ".dat");
  plot.script = dir / (name + ".gp");
  study_support::write_text_file(plot.data, data);
  study_support::write_text_file(plot.script, script);
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    plot.note = "gnuplot is not installed (Debian: gnuplot-nox), so there is no plot";
    return plot;
  }
  // gnuplot's warnings go to NAME.log, not between the study's lines.
  const std::string command = "cd '" + dir.string() + "' && gnuplot '" + name + ".gp' 2> '" + name + ".log'";
  if (std::system(command.c_str()) != 0) {
    plot.note = "gnuplot failed on " + plot.script.string() + " (see " + (dir / (name + ".log")).string() +
                "), so there is no plot";
    return plot;
  }
  plot.svg = dir / (name + ".svg");
  return plot;
}

std::string plot_summary(const StudyPlot& plot) {
  return plot.svg.empty() ? plot.note : "the plot is " + plot.svg.string();
}

std::string study_pad(std::string text, std::size_t width, bool right) {
  if (text.size() < width) text.insert(right ? text.begin() : text.end(), width - text.size(), ' ');
  return text;
}

std::string study_us(double seconds, int decimals) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", decimals, seconds * 1e6);
  return text;
}

}  // namespace copse
