#pragma once
// Read or copy, chosen by the calls' own times: whether a one-node team's
// processes broadcast, allgather, reduce and reduce-scatter large vectors by reading each
// other's memory (cross-memory attach, one copy: LinkConfig::fast_attach) or
// through the node's segment (the ring and the schedules' stage: two copies,
// made on both cores at once).
//
// Which is faster is not a property of the machine one can read once. On
// the 2-core virtual machines this project runs on, the copies through the
// segment run 2-4 times faster or slower from launch to launch and, now and
// then, within a launch (the host moves the virtual cores; lines handed from
// core to core are cheap or dear), while the read -- Open MPI's own way at
// these sizes -- stays put. bench/mpi_collectives --native, np 2, tuned/copse
// by median with Open MPI's calls in the same processes (plain against plain
// 0.98-1.02): through the segment reduce 512 KiB 1.24-1.69 in four launches,
// 0.34 and 0.51-0.54 in four others; by reading 0.92-0.98 in all. The
// set-up's probe (runtime/mpi_cma_probe.cpp) guesses the mode once; it
// guessed the fast one for a launch whose calls then ran in the slow one.
//
// So each kind of call (collective, and size to the power of two) keeps
// trying both: its first kTrialCalls * 2 calls, and as many every
// kTrialEvery calls after, copy kTrialCalls times, then read as often; each
// rank times its own calls, and at the trial's end the team agrees on the
// slowest rank's median of each way (MpiRank::agree_on_reads: one
// MPI_Allreduce over the team, every kTrialEvery calls of a kind) and takes
// the faster until the next trial. Every rank counts the same calls of the
// same kinds (MPI orders a communicator's collectives, and their sizes agree),
// so every rank chooses alike without talking but at the agreements.
// Between trials, a kind whose sides moved since costs at most one trial's
// worse calls per kTrialEvery: about 1.6 % of the calls when one way is
// three times slower.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

class ReadChoice {
 public:
  static constexpr int kTrialCalls = 8;               // per way and trial
  static constexpr std::uint32_t kTrialEvery = 1024;  // calls of a kind, trial to trial
  // Smaller vectors never read (DirectReduce::kPostBytes: they go through
  // the slots), so nothing is tried below this.
  static constexpr std::size_t kFromBytes = 8192;

  ReadChoice();

  // Whether a call of `c` (bcast, allgather, reduce, reduce_scatter: its
  // whole input) of `bytes` is chosen
  // here: false for the others and for vectors below kFromBytes.
  static bool chooses(Collective c, std::size_t bytes);

  // A call begins (chooses(c, bytes)): whether it reads.
  bool reads(Collective c, std::size_t bytes);
  // It ended, taking `seconds` on this rank: true when its kind's trial is
  // over and the team must agree now, with trial_times() in and agree() out.
  bool timed(double seconds);
  // This rank's median seconds of the ended trial's calls: {copy, read}.
  std::array<double, 2> trial_times() const;
  // The team's slowest of each ({copy, read}, MPI_MAX over trial_times()):
  // the kind reads until its next trial if the read was faster.
  void agree(std::array<double, 2> slowest);

 private:
  struct Kind {
    std::uint32_t calls = 0;                                 // so far
    bool read = false;                                       // outside trials, as last agreed
    std::array<std::array<double, kTrialCalls>, 2> trial{};  // seconds: copy, read
  };
  Kind& kind(Collective c, std::size_t bytes);

  std::vector<Kind> kinds_;  // per collective chosen and power of two
  Kind* current_ = nullptr;  // the call between reads() and timed()
  bool current_reads_ = false;
};

}  // namespace copse
