// Study: flat versus hierarchical allreduce at its default size
// (tools/study_flat_hier.hpp): 1 MiB and 8 B on 4x8, 16x16 and 64x32 under
// the cluster model, every form at its best block count, 4x8 emulated and
// verified, the rest simulated. `copse study flat-hier` is the same study
// with options and --json; this prints its tables and writes flat_hier.dat,
// flat_hier.gp and (with gnuplot) flat_hier.svg into OUT (default
// study-flat-hier). Exit 1 if an emulated run failed.
// Usage: study_flat_hier [OUT]
#include "tools/study_flat_hier.hpp"

#include <cstdio>
#include <filesystem>

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : "study-flat-hier";
  std::filesystem::create_directories(dir);
  const copse::FlatHierStudy study = copse::run_flat_hier_study({});
  const copse::StudyPlot plot = copse::write_flat_hier_plot(dir, study);
  std::printf("%s\nwrote %s and %s; %s\n", copse::flat_hier_tables(study).c_str(), plot.data.c_str(),
              plot.script.c_str(), copse::plot_summary(plot).c_str());
  return study.ok() ? 0 : 1;
}
