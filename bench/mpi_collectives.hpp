#pragma once
// What bench/mpi_collectives.cpp (the measuring program) shares with its
// report mode (bench/mpi_collectives_report.cpp): the collectives it knows
// and the text of sizes and times.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mpi_collectives {

using json = nlohmann::ordered_json;  // keys in the order written

enum class Id {
  allreduce,
  reduce,
  bcast,
  barrier,
  allgather,
  reduce_scatter_block,
  reduce_scatter,
  scatter,
  gather,
  alltoall
};

struct Collective {
  Id id;
  const char* name;      // on the command line and in the JSON
  const char* function;  // in the tables
  bool rooted;
  // Blocks of `count` elements in each rank's send and receive buffers: np
  // where one buffer holds every rank's block, 0 for the barrier.
  bool team_send, team_recv;
  bool has_data() const { return id != Id::barrier; }
  bool reduces() const {
    return id == Id::allreduce || id == Id::reduce || id == Id::reduce_scatter_block || id == Id::reduce_scatter;
  }
  // Each rank's block of a vector cut into np (the two reduce-scatters).
  bool scatters_reduction() const { return id == Id::reduce_scatter_block || id == Id::reduce_scatter; }
  const char* data_text() const { return reduces() ? ", float32 sum" : has_data() ? ", float32" : ""; }
  std::size_t blocks(bool send, int ranks) const { return (send ? team_send : team_recv) ? std::size_t(ranks) : 1; }
};

inline constexpr Collective kCollectives[] = {
    {Id::allreduce, "allreduce", "MPI_Allreduce", false, false, false},
    {Id::reduce, "reduce", "MPI_Reduce", true, false, false},
    {Id::bcast, "bcast", "MPI_Bcast", true, false, false},
    {Id::barrier, "barrier", "MPI_Barrier", false, false, false},
    {Id::allgather, "allgather", "MPI_Allgather", false, false, true},
    {Id::reduce_scatter_block, "reduce_scatter_block", "MPI_Reduce_scatter_block", false, true, false},
    {Id::reduce_scatter, "reduce_scatter", "MPI_Reduce_scatter", false, true, false},  // equal counts
    {Id::scatter, "scatter", "MPI_Scatter", true, true, false},
    {Id::gather, "gather", "MPI_Gather", true, false, true},
    {Id::alltoall, "alltoall", "MPI_Alltoall", false, true, true},
};

const Collective* collective_named(const std::string& name);  // null: no such collective

std::string human(std::size_t bytes);             // "8 B", "16 KiB", "1 MiB"
std::size_t parse_size(const std::string& text);  // "8", "16KiB", "1.5MiB", "64M": bytes; 0 on a malformed size
std::vector<std::string> split(const std::string& list, char sep = ',');  // the non-empty items
std::string us(double seconds, int width);                                // microseconds, right-aligned
double min_of(const std::vector<double>& v);
double median_of(std::vector<double> v);

// Report mode: pools the JSON lines of runs and prints them side by side.
struct ReportOptions {
  std::vector<std::string> files;
  std::string baseline;  // default: "tuned" if present, else the first label seen
  std::string csv_path;
  std::vector<std::string> stats;  // files of per-process call counts (COPSE_MPI_STATS)
};
// The report mode's options; "" or what is wrong.
std::string parse_report(int argc, char** argv, ReportOptions& o);
int run_report(const ReportOptions& o);  // the exit status

}  // namespace mpi_collectives
