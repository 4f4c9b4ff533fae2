// Study: Bjørndalen et al.'s 8-way cluster (tools/study_bjorndalen.hpp): the
// paper's four configurations on the emulator under LogGP with a shared
// 100 Mbit/s interface and under Hockney, beside the paper's figures, and the
// sweep of o and the intra/inter latency ratio. `copse study bjorndalen` is
// the same study with --json; this prints its tables and writes
// bjorndalen.dat, bjorndalen.gp and (with gnuplot) bjorndalen.svg into OUT.
// Exit 1 if an emulated run failed.
// Usage: study_bjorndalen [intra_L_us=37.5] [inter_L_us=150] [overhead_us=10] [OUT=study-bjorndalen]
#include "tools/study_bjorndalen.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

int main(int argc, char** argv) {
  copse::BjorndalenStudyOptions o;
  if (argc > 1) o.intra_latency = std::atof(argv[1]) * 1e-6;
  if (argc > 2) o.inter_latency = std::atof(argv[2]) * 1e-6;
  if (argc > 3) o.overhead = std::atof(argv[3]) * 1e-6;
  const std::filesystem::path dir = argc > 4 ? argv[4] : "study-bjorndalen";
  std::filesystem::create_directories(dir);
  const copse::BjorndalenStudy study = copse::run_bjorndalen_study(o);
  const copse::StudyPlot plot = copse::write_bjorndalen_plot(dir, study);
  std::printf("%s\nwrote %s and %s; %s\n", copse::bjorndalen_tables(study).c_str(), plot.data.c_str(),
              plot.script.c_str(), copse::plot_summary(plot).c_str());
  return study.ok() ? 0 : 1;
}
