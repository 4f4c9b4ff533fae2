#pragma once
// bench/mpi_collectives.cpp's measure mode as its command line gives it
// (bench/mpi_collectives_options.cpp parses it and holds the usage text).

#include <cstddef>
#include <string>
#include <vector>

#include "mpi_collectives.hpp"
#include "mpi_collectives_forms.hpp"

namespace mpi_collectives {

struct Options {
  std::vector<const Collective*> collectives;
  std::vector<Form> forms{Form::blocking};
  Sync sync = Sync::barrier;
  std::vector<std::string> roots{"0"};  // integers or "last"
  std::vector<std::size_t> sizes;
  std::size_t min_size = 0;  // --min-size: smaller sizes, and collectives without data, left out
  bool quick = false;
  std::string label = "mpi";
  std::vector<std::string> native;  // --native: further sides, the library's own calls (PMPI_)
  std::string config;               // default: "np<P>"
  std::string json_path;
};

extern const char* const kUsage;

// Parses the measure mode's options for a run of `ranks` processes (rank
// 0's own notes go to stderr); "" or what is wrong.
std::string parse_measure(int argc, char** argv, Options& o, int rank, int ranks);

}  // namespace mpi_collectives
