#pragma once
// What the studies (tools/study_*.hpp) share: running independent points on
// every core with progress, and turning a gnuplot script into an SVG plot.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>

#include "common/progress.hpp"

namespace copse {

// Runs run(0) .. run(count - 1), on every core through oneTBB when
// `parallel` (each point must touch only its own result), reporting the
// points done to `progress` (from whichever thread finished one). An
// exception a point throws stops the others and is rethrown here.
void for_each_point(std::size_t count, const std::function<void(std::size_t)>& run, const ProgressCallback& progress,
                    bool parallel = true);

// Writes `data` to dir/NAME.dat and `script` to dir/NAME.gp and, when gnuplot
// is installed, runs the script in `dir` (it writes NAME.svg there; gnuplot's
// messages go to NAME.log). What became of the plot:
struct StudyPlot {
  std::filesystem::path data, script, svg;  // svg empty: no plot
  std::string note;                         // why there is no plot ("gnuplot is not installed ..."), or empty
};
StudyPlot render_gnuplot(const std::filesystem::path& dir, const std::string& name, const std::string& data,
                         const std::string& script);
// "the plot is DIR/NAME.svg" or the note: the end of a study's "Wrote ..." line.
std::string plot_summary(const StudyPlot& plot);

// `text` padded with spaces to `width`, on the right (or, with right, the left).
std::string study_pad(std::string text, std::size_t width, bool right = false);

// Microseconds with `decimals` decimals ("191.9"), the studies' unit.
std::string study_us(double seconds, int decimals = 1);

}  // namespace copse
