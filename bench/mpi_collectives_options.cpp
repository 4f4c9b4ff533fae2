// The measure mode's command line of bench/mpi_collectives.cpp: its usage
// text and its parser.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "mpi_collectives_options.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace mpi_collectives {

namespace {

std::vector<std::size_t> default_sizes(bool quick) {
  if (quick) return {8, 16u << 10, 1u << 20};
  std::vector<std::size_t> sizes{8};
  for (std::size_t s = 16; s <= (64u << 20); s *= 4) sizes.push_back(s);
  return sizes;
}

}  // namespace

const char* const kUsage =
    "usage: mpirun -np P [...] mpi_collectives [--collectives LIST] [--forms LIST] [--roots LIST]\n"
    "                                          [--sizes LIST] [--min-size SIZE] [--quick] [--sync barrier|p2p]\n"
    "                                          [--label NAME] [--native LABELS] [--config NAME] [--json FILE]\n"
    "       mpi_collectives --report FILE... [--baseline LABEL] [--csv FILE] [--stats FILE...]\n"
    "  --collectives  allreduce,reduce,bcast,barrier,allgather,reduce_scatter_block,reduce_scatter,\n"
    "                 scatter,gather,alltoall\n"
    "                 (default: all)\n"
    "  --forms        blocking,nonblocking,persistent: the calls, MPI_I<collective> + MPI_Wait, or\n"
    "                 made once, then MPI_Start + MPI_Wait (left out where the MPI has no persistent\n"
    "                 collectives) (default: blocking)\n"
    "  --roots        roots of reduce, bcast, scatter, gather: integers or 'last' (default: 0)\n"
    "  --sizes        bytes per rank, e.g. 8,16KiB,1MiB, multiples of 4 (default: 8 B and 16 B .. 64 MiB\n"
    "                 in powers of 4; --quick: 8 B, 16 KiB, 1 MiB, and a tenth of the time per size)\n"
    "  --min-size     leave out the sizes below SIZE, and the collectives without data (barrier)\n"
    "  --sync         before each timed call: MPI_Barrier, or p2p, a dissemination barrier of\n"
    "                 MPI_Sendrecv no collective library replaces (default: barrier)\n"
    "  --label        this run's name in the output, e.g. tuned or copse (default: mpi)\n"
    "  --native       further sides in the same run, one per label, e.g. tuned,tuned2: the MPI\n"
    "                 library's own calls (PMPI_), which no interposer replaces, timed interleaved\n"
    "                 with this run's (MPI_) call by call; under LD_PRELOAD=libcopse_mpi.so the\n"
    "                 run compares copse with the library in the same processes\n"
    "  --config       the configuration's name (default: np<P>)\n"
    "  --json         append one JSON line per collective, root and size to FILE\n"
    "  --report       pool the JSON lines of FILE... and print them side by side\n"
    "  --baseline     the label others are compared with (default: tuned if present, else the first)\n"
    "  --csv          with --report: also write the pooled figures to FILE\n"
    "  --stats        with --report: sum the per-process call counts in FILE... (COPSE_MPI_STATS lines)\n";

std::string parse_measure(int argc, char** argv, Options& o, int rank, int ranks) {
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--quick") {
      o.quick = true;
      continue;
    }
    if (a + 1 >= argc) return "unknown argument or missing value: " + arg;
    const std::string value = argv[++a];
    if (arg == "--collectives") {
      o.collectives.clear();
      for (const std::string& name : split(value)) {
        const Collective* c = collective_named(name);
        if (!c) return "unknown collective: " + name;
        o.collectives.push_back(c);
      }
    } else if (arg == "--forms") {
      o.forms.clear();
      for (const std::string& name : split(value)) {
        Form form = Form::blocking;
        if (!form_named(name, form)) return "unknown form: " + name + " (blocking, nonblocking or persistent)";
        if (form == Form::persistent && !has_persistent()) {
          if (rank == 0) std::fprintf(stderr, "mpi_collectives: this MPI has no persistent collectives: left out\n");
          continue;
        }
        if (std::find(o.forms.begin(), o.forms.end(), form) == o.forms.end()) o.forms.push_back(form);
      }
      if (o.forms.empty()) return "--forms: no form to measure";
    } else if (arg == "--roots") {
      o.roots = split(value);
      for (const std::string& r : o.roots) {
        const bool number = !r.empty() && r.find_first_not_of("0123456789") == std::string::npos;
        if (r != "last" && !(number && std::atoi(r.c_str()) < ranks))
          return "not a root of " + std::to_string(ranks) + " ranks: " + r;
      }
    } else if (arg == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(value)) {
        const std::size_t bytes = parse_size(s);
        if (bytes == 0 || bytes % sizeof(float) != 0 || bytes / sizeof(float) > INT32_MAX)
          return "not a size in whole floats: " + s;
        o.sizes.push_back(bytes);
      }
    } else if (arg == "--min-size") {
      o.min_size = parse_size(value);
      if (o.min_size == 0) return "not a size: " + value;
    } else if (arg == "--sync") {
      if (!sync_named(value, o.sync)) return "unknown line-up: " + value + " (barrier or p2p)";
    } else if (arg == "--label") {
      o.label = value;
    } else if (arg == "--native") {
      o.native = split(value);
    } else if (arg == "--config") {
      o.config = value;
    } else if (arg == "--json") {
      o.json_path = value;
    } else {
      return "unknown argument: " + arg;
    }
  }
  if (o.collectives.empty())
    for (const Collective& c : kCollectives) o.collectives.push_back(&c);
  if (o.sizes.empty()) o.sizes = default_sizes(o.quick);
  if (o.min_size) {
    std::erase_if(o.sizes, [&](std::size_t bytes) { return bytes < o.min_size; });
    std::erase_if(o.collectives, [](const Collective* c) { return !c->has_data(); });
    if (o.sizes.empty()) return "--min-size: no size of at least " + std::to_string(o.min_size) + " B to measure";
    if (o.collectives.empty()) return "--min-size: no collective with data to measure";
  }
  if (o.roots.empty()) return "--roots needs at least one root";
  for (std::size_t i = 0; i < o.native.size(); ++i)
    if (o.native[i] == o.label ||
        std::find(o.native.begin(), o.native.begin() + i, o.native[i]) != o.native.begin() + i)
      return "--native: the label '" + o.native[i] + "' is taken; every side needs its own";
  return "";
}

}  // namespace mpi_collectives
