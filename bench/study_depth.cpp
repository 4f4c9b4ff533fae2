// Study: depth versus fan-out at its default size (tools/study_depth.hpp):
// allreduce on nodes of 8 ranks under the cluster model, p = 16 .. 4096
// through the simulator, at 8 B and 1 MiB, every form at its best block count.
// `copse study depth` is the same study with options and --json; this prints
// its tables and writes depth.dat, depth.gp and (with gnuplot) depth.svg
// into OUT (default study-depth).
// Usage: study_depth [OUT]
#include "tools/study_depth.hpp"

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "study-depth";
  std::filesystem::create_directories(dir);
  const copse::DepthStudy study = copse::run_depth_study({});
  const copse::StudyPlot plot = copse::write_depth_plot(dir, study);
  std::printf("%s\nwrote %s and %s; %s\n", copse::depth_tables(study).c_str(), plot.data.c_str(), plot.script.c_str(),
              copse::plot_summary(plot).c_str());
  return 0;
}
