#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"
#include "runtime/mpi_team_state.hpp"
#include "transport/direct_bcast.hpp"
#include "transport/direct_reduce.hpp"
#include "transport/link_engine.hpp"

namespace copse::mpi {

namespace {

// The probe's word: what a reader expects to find in its peer's memory,
// mixed with the peer's pid.
constexpr std::uint64_t kProbeWord = 0x636f7073652d636dULL;
// The probe's timed read (CommOptions::Attach::automatic).
constexpr std::size_t kProbeSampleBytes = std::size_t{1} << 20;
// The ring against the read (TeamState::reads_beat_ring): a broadcast of
// this many bytes each way, this many times after one each to warm up; the
// read wins where its median is below the ring's by this factor (the two
// modes differ by 2-4 times; with five rounds and no margin one launch in
// fifteen in the ring's mode chose the read on a 31 against 32 us reading,
// and its bcasts of 512 KiB took 47 us instead of 18).
constexpr std::size_t kRingProbeBytes = std::size_t{256} << 10;
constexpr int kRingProbeRounds = 9;
constexpr double kReadMustWinBy = 1.25;

using Micros = std::chrono::duration<double, std::micro>;

}  // namespace

// Cross-memory attach: every process reads a word of each node peer's
// private memory with process_vm_readv, as the link engine will read their
// buffers, and the whole communicator agrees to use it only if every read
// returned the word -- everywhere, not per node, because the pieces a
// collective runs in depend on it and every process must cut the same ones.
// Automatic: each process also times reading 1 MiB of its next node peer's
// memory against copying 1 MiB itself, and where the read costs more than
// 1.5 copies keeps it to allgathers (TeamState::AttachUse): it replaces the
// window's two copies, but the sender's copy into its stage often runs in
// parallel with the receiver's work (in an exchange, on the other core), so
// the break-even lies between one copy and two. (Measured on a 2-core AMD
// EPYC virtual machine: 75 us against 19 us, and an allreduce of 1 MiB
// twice as slow with it; on the same machine later 157 against 47 us.) Such
// a verdict is no error: the window serves the rest, and the note says why.
// The same agreement says whether any node holds more ranks than run at once.
void TeamState::probe_cross_memory_attach(int concurrent_ranks) {
  using Attach = CommOptions::Attach;
  const auto me = static_cast<std::int64_t>(getpid());
  // On this stack and heap, which no peer leaves before the agreement below,
  // i.e. before every peer has read them. Volatile: really in memory.
  volatile std::uint64_t word = kProbeWord ^ static_cast<std::uint64_t>(me);
  const bool timed = options.cross_memory_attach == Attach::automatic;
  std::vector<std::byte> sample(timed ? kProbeSampleBytes : 0, std::byte{1});
  const std::int64_t mine[4] = {static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(&word)), me, process,
                                static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(sample.data()))};
  int node_size = 0, node_rank = 0;
  check_mpi(PMPI_Comm_size(node_comm, &node_size), "MPI_Comm_size (node)");
  check_mpi(PMPI_Comm_rank(node_comm, &node_rank), "MPI_Comm_rank (node)");
  std::vector<std::int64_t> all(4 * static_cast<std::size_t>(node_size));
  check_mpi(PMPI_Allgather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, node_comm),
            "MPI_Allgather (cross-memory attach probe)");
  int ok = options.cross_memory_attach == Attach::off ? 0 : 1;
  int fast = options.cross_memory_attach == Attach::allgather ? 0 : 1;  // the timed read: at most 1.5 copies
  cma_note = !ok ? "off (not asked for)" : fast ? "" : "allgather only (asked for)";
  for (std::size_t i = 0; ok && i < static_cast<std::size_t>(node_size); ++i) {
    const std::int64_t pid = all[4 * i + 1], peer = all[4 * i + 2];
    if (pid == me) continue;
    std::uint64_t got = 0;
    const int error =
        cross_memory_read(static_cast<int>(pid), static_cast<std::uint64_t>(all[4 * i]), &got, sizeof got);
    if (error == 0 && got == (kProbeWord ^ static_cast<std::uint64_t>(pid))) continue;
    ok = 0;
    cma_note = "off: process " + std::to_string(process) + " cannot read the memory of process " +
               std::to_string(peer) + " (pid " + std::to_string(pid) +
               ") by process_vm_readv: " + (error ? std::strerror(error) : "it read another value");
  }
  if (ok && timed && node_size > 1) {
    const auto next = static_cast<std::size_t>((node_rank + 1) % node_size);
    const auto pid = static_cast<int>(all[4 * next + 1]);
    const auto from = static_cast<std::uint64_t>(all[4 * next + 3]);
    std::vector<std::byte> to(kProbeSampleBytes, std::byte{0});
    double read = 1e30, copy = 1e30;  // the best of a few, as a warm run would see
    bool failed = false;
    for (int rep = 0; rep < 5 && !failed; ++rep) {
      auto t0 = Clock::now();
      failed = cross_memory_read(pid, from, to.data(), to.size()) != 0;
      read = failed ? 1e30 : std::min(read, Micros(Clock::now() - t0).count());
      t0 = Clock::now();
      std::memcpy(to.data(), sample.data(), to.size());
      asm volatile("" : : "r"(to.data()) : "memory");  // the copy is used
      copy = std::min(copy, Micros(Clock::now() - t0).count());
    }
    if (failed) {
      ok = 0;
      cma_note = "off: process " + std::to_string(process) + " failed to read 1 MiB of a node peer by process_vm_readv";
    } else if (read > 1.5 * copy) {
      fast = 0;
      char text[256];
      std::snprintf(text, sizeof text,
                    "allgather only: process_vm_readv read 1 MiB in %.0f us on process %d, more than 1.5 times the "
                    "%.0f us of a local copy (the window's two copies, one often made in parallel by the sender)",
                    read, process, copy);
      cma_note = text;
    }
  }
  const int fits = ranks_fit_cores(static_cast<int>(node_members.size()), ranks_on_host, concurrent_ranks) ? 1 : 0;
  const int verdicts[4] = {ok, fast, fits, timed ? 1 : 0};
  int agreed[4] = {0, 0, 0, 0};
  check_mpi(PMPI_Allreduce(verdicts, agreed, 4, MPI_INT, MPI_MIN, dup), "MPI_Allreduce (cross-memory attach)");
  oversubscribed = agreed[2] == 0;
  attach_use = agreed[0] == 0 ? AttachUse::none : agreed[1] == 0 ? AttachUse::allgather : AttachUse::every;
  if (attach_use == AttachUse::every) cma_note = "on";
  if (ok && attach_use == AttachUse::none) cma_note = "off: another process cannot use it (its note says why)";
  if (fast && attach_use == AttachUse::allgather)
    cma_note = "allgather only: another process found the kernel's read slow (its note says why)";
  // Where the read was timed slow, whether it still beats the ring (the
  // same condition on every process: agreed -- every process timed, even if
  // one was configured otherwise -- or the team's layout).
  const auto* segment = arena->at<SegmentRoot>(arena->root());
  if (agreed[3] == 0 || attach_use != AttachUse::allgather || segment->direct == 0) return;
  const RingAgainstRead times = ring_against_read();
  // Minima: whether every reader found the read faster (the root abstains),
  // and whether nobody timed (a node of one process).
  const bool timed_here = times.ring > 0;
  const bool read_wins = times.read * kReadMustWinBy < times.ring;
  const int votes[2] = {!timed_here || read_wins ? 1 : 0, timed_here ? 0 : 1};
  int agreed_votes[2] = {0, 0};
  check_mpi(PMPI_Allreduce(votes, agreed_votes, 2, MPI_INT, MPI_MIN, dup), "MPI_Allreduce (ring against read)");
  if (agreed_votes[1] == 1) return;  // nobody timed
  reads_beat_ring = agreed_votes[0] == 1;
  if (max_threads == 1) read_choice = std::make_unique<ReadChoice>();
  char text[256];
  if (!timed_here)
    std::snprintf(text, sizeof text, "; %s (its readers timed a broadcast of %zu KiB)",
                  reads_beat_ring ? "the read beat the ring" : "the ring beat the read", kRingProbeBytes >> 10);
  else
    std::snprintf(text, sizeof text, "; %s (a broadcast of %zu KiB: %.1f us by address, %.1f through the ring%s)",
                  reads_beat_ring ? "the read beat the ring" : "the ring beat the read", kRingProbeBytes >> 10,
                  times.read, times.ring, reads_beat_ring == read_wins ? "" : ", another reader's vote");
  cma_note += text;
  if (read_choice) cma_note += "; then each kind of call by its own times";
}

TeamState::RingAgainstRead TeamState::ring_against_read() {
  int node_size = 0, node_rank = 0;
  check_mpi(PMPI_Comm_size(node_comm, &node_size), "MPI_Comm_size (node)");
  check_mpi(PMPI_Comm_rank(node_comm, &node_rank), "MPI_Comm_rank (node)");
  const std::size_t ring_bytes = DirectBcast::shared_bytes(node_size);
  if (node_size < 2 || ring_bytes > node_members.size() * window_stride) return {};
  // Over the windows, which nothing uses before the set-up's agreement that
  // follows this (an allreduce over every process).
  if (node_rank == 0) DirectBcast::create_at(windows, node_size);
  check_mpi(PMPI_Barrier(node_comm), "MPI_Barrier (ring against read)");
  const SpinPolicy spin = LinkEngine::spin_for(!oversubscribed);  // as the team's engine will wait
  DirectBcast ring(windows, node_size, FutexScope::shared, &spin);
  DirectRank me;
  me.rank = node_rank;
  WaitPolicy policy;
  policy.deadline = Clock::now() + std::chrono::seconds(10);
  policy.timeout_message = [] {
    return std::string("cross-memory attach probe: a node peer took no part in timing the ring within 10 s");
  };
  std::vector<std::byte> vector(kRingProbeBytes, std::byte{0});
  std::vector<double> ring_us, read_us;
  for (int round = 0; round <= kRingProbeRounds; ++round)
    for (const bool by_address : {false, true}) {
      const auto t0 = Clock::now();
      ring.bcast(me, vector.data(), vector.size(), 0, policy, by_address);
      const double us = Micros(Clock::now() - t0).count();
      if (round > 0) (by_address ? read_us : ring_us).push_back(us);
    }
  check_mpi(PMPI_Barrier(node_comm), "MPI_Barrier (ring against read)");  // every rank is done with the ring
  if (node_rank == 0) std::memset(windows, 0, ring_bytes);
  if (node_rank == 0) return {};  // the root writes; its readers time
  return {median(ring_us), median(read_us)};
}

}  // namespace copse::mpi
