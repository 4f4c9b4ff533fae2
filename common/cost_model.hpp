#pragma once
// The cost model shared by the simulator and the emulator's virtual clock.
//
// Two timing rules, chosen per model (Timing):
//
// Hockney (the default, and the old figures): a transfer of n bytes over link
// level L takes alpha[L] + beta[L]*n and is a rendezvous: it starts when both
// the sender's and the receiver's ports are free and both ranks have reached
// the step holding it, and it ends for both at the same moment:
//   start = max(sender_ready, receiver_ready),  end = start + alpha + beta*n.
//
// LogGP (Alexandrov et al. 1995), per level: L = alpha (wire latency), G = beta
// (per byte), o = overhead (CPU time per message at each end), g = gap (least
// time between two messages of one port). A send is eager: the sender's port
// is busy for max(o + G*n, g) from its ready time S and is then free, whether
// or not the receiver has arrived; the message arrives at S + o + G*n + L; the
// receiver, ready at R, is done at max(R + max(o + G*n, g), arrival + o).
// Wire latencies of concurrent messages therefore overlap, and only o (and G)
// serialise at a busy port: a root hearing from f children that sent at once
// is done after L + (f+1)*o (+ G*n per message), not f*L as under Hockney.
//
// Combining n received bytes into held data takes gamma*n; optionally every
// received message also costs its receiver a fixed overhead (receive_overhead,
// charged after the transfer like the combine, under either rule). A step ends
// at max(step start, end of its transfers) + gamma * combined bytes (a local
// copy costs gamma per byte as well).
//
// Levels: by default 0 = same node, 1 = other node. With a group size K
// (with_group_size) there are three: 0 = same group (K consecutive ranks on
// one node, counted from rank 0 -- the shared-cache groups of the hierarchy
// planner when node sizes are multiples of K), 1 = same node, 2 = other node.
//
// Shared network interface (with_nic): off-node messages of one node share
// the node's interface, `rails` lanes of 1/nic.beta bytes per second each.
// The share is fair and static: an off-node message pays per byte
//   max(beta[level], nic.beta * max(1, k / rails))
// where k is the larger of the number of ranks of the sender's node that send
// off-node in this schedule and the number of ranks of the receiver's node
// that receive off-node in it (NicLoad, measured from the schedule before it
// runs). Why static: the emulator runs ranks as real threads, so a queue at a
// shared interface would need a global order of events that threads do not
// have; counting the node's off-node talkers is a rule each rank evaluates
// alone, identically in both engines. It is exact when those talkers use the
// interface at the same time (lane decompositions, multi-leader hierarchies,
// recursive doubling and halving across nodes) and pessimistic when they take
// turns (a pipelined tree whose off-node edges are busy at different times).
// An engine given no NicLoad (the thread Team, which runs many schedules on
// one link) charges k = 1.
//
// Time is kept in integer picoseconds so that virtual times are exact and
// bit-identical between engines, whatever order the host runs them in.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/rank_map.hpp"
#include "common/schedule.hpp"

namespace copse {

using Picos = std::int64_t;
inline double to_seconds(Picos t) { return static_cast<double>(t) * 1e-12; }
inline Picos to_picos(double seconds) { return static_cast<Picos>(seconds * 1e12 + 0.5); }

enum class Ports : std::uint8_t { bidirectional, unidirectional };

struct LinkCost {
  double alpha = 0;     // seconds per message (LogGP: L, the wire latency)
  double beta = 0;      // seconds per byte (LogGP: G)
  double overhead = 0;  // LogGP only: o, the CPU time per message at each end
  double gap = 0;       // LogGP only: g, the least time between two messages of one port
};

enum class Timing : std::uint8_t { hockney, loggp };

// A node's shared network interface: `rails` lanes of `beta` seconds per byte
// each; beta 0: none (every rank has a private port to the network).
struct NicCost {
  double beta = 0;
  int rails = 1;
};

// How many of each node's ranks send (receive) off-node in one schedule.
struct NicLoad {
  std::vector<int> senders, receivers;  // per node
};
// Counts them by running every rank's schedule once (without data). Peers out
// of range are skipped (the engines report them).
NicLoad measure_nic_load(const SchedulePlan& plan, int ranks, const RankMap& layout);

// When a matched transfer ends for its sender and for its receiver (the same
// moment under Hockney).
struct TransferEnds {
  Picos send_end = 0;
  Picos recv_end = 0;
};

// Round half up; the argument is never negative. (llround is a libm call on
// the simulator's hottest path.)
inline Picos round_picos(double x) { return static_cast<Picos>(x + 0.5); }

// What a transfer between one pair of ranks costs, the layout and interface
// share resolved: CostModel::transfer_ends is pair_cost() then ends(). The
// simulator computes it once when every pair is alike (every rank on a node
// of its own) and calls ends() alone per message.
struct PairCost {
  Picos alpha = 0;
  double per_byte = 0;  // picoseconds per byte
  Picos overhead = 0;
  Picos gap = 0;
  bool loggp = false;

  // Inlined: out of line it was a call per message, 5% of two-tree's run at
  // p = 2^22.
  [[gnu::always_inline]] TransferEnds ends(std::uint64_t bytes, Picos sender_ready, Picos receiver_ready) const {
    const Picos wire = round_picos(per_byte * static_cast<double>(bytes));
    if (!loggp) {
      const Picos end = std::max(sender_ready, receiver_ready) + alpha + wire;
      return {end, end};
    }
    const Picos busy = std::max(overhead + wire, gap);
    const Picos arrival = sender_ready + overhead + wire + alpha;
    return {sender_ready + busy, std::max(receiver_ready + busy, arrival + overhead)};
  }
};

// The documented defaults (README, "The cost model"): the one place they are
// written down; configuration and the CLI read them from here.
namespace model_defaults {
inline constexpr LinkCost same_node{2e-7, 5e-11};
inline constexpr LinkCost other_node{1.5e-6, 1e-10};
inline constexpr double gamma = 2.5e-11;
inline constexpr Ports ports = Ports::bidirectional;
inline constexpr double receive_overhead = 0;
// The cluster preset (CostModel::cluster(), and the configuration's default
// model): LogGP timing with these per-message overheads, and one shared
// interface per node of nic.beta per byte per rail.
inline constexpr Timing cluster_timing = Timing::loggp;
inline constexpr double cluster_same_node_overhead = 5e-8;
inline constexpr double cluster_other_node_overhead = 5e-7;
inline constexpr NicCost cluster_nic{4e-11, 1};
}  // namespace model_defaults

// Local work of a step: bytes combined on receipt plus bytes copied.
inline std::uint64_t local_work_elements(const Step& step) {
  const std::uint64_t combined = (step.recv && step.combine != Combine::replace) ? step.recv.count : 0;
  return combined + step.copy.count;
}

class CostModel {
 public:
  // The defaults: two levels (0: same node, 1: other node).
  CostModel() : CostModel(std::vector<LinkCost>{model_defaults::same_node, model_defaults::other_node}) {}
  explicit CostModel(std::vector<LinkCost> levels, double gamma = model_defaults::gamma,
                     Ports ports = model_defaults::ports, double receive_overhead = model_defaults::receive_overhead);

  // One-level model: every pair of ranks is `link` apart (the simulator's default).
  static CostModel uniform(LinkCost link, double gamma, Ports ports);
  // The studies' cluster model: the default levels with LogGP timing (o 50 ns
  // on a node, 0.5 us between nodes) and one shared 25 GB/s interface per
  // node (40 ps/B, one rail) while one rank alone reaches 10 GB/s.
  static CostModel cluster();

  // Options beside the constructor's (see the top of this file).
  CostModel& with_timing(Timing timing);
  CostModel& with_nic(NicCost nic);  // UsageError for a negative beta or fewer than one rail
  // Three levels (same group, same node, other node); needs three LinkCosts.
  CostModel& with_group_size(int ranks);
  // This model with `plan`'s NicLoad attached if it has a shared interface and
  // none is attached yet; else an unchanged copy. Both engines call it.
  CostModel for_schedule(const SchedulePlan& plan, int ranks, const RankMap& layout) const;

  // The Hockney duration of a transfer at `level` (no interface sharing).
  Picos transfer(int level, std::uint64_t bytes) const;
  // The level between two ranks of `layout`.
  int level_of(const RankMap& layout, int a, int b) const;
  int off_node_level() const { return group_size_ > 0 ? 2 : 1; }
  // The one call both engines make per matched transfer of `bytes` bytes from
  // src (ready at sender_ready) to dst (ready at receiver_ready).
  TransferEnds transfer_ends(const RankMap& layout, int src, int dst, std::uint64_t bytes, Picos sender_ready,
                             Picos receiver_ready) const {
    return pair_cost(layout, src, dst).ends(bytes, sender_ready, receiver_ready);
  }
  PairCost pair_cost(const RankMap& layout, int src, int dst) const;
  Timing timing() const { return timing_; }
  const NicCost& nic() const { return nic_; }
  const std::shared_ptr<const NicLoad>& nic_load() const { return nic_load_; }
  int group_size() const { return group_size_; }
  Picos combine(std::uint64_t bytes) const { return round_picos(gamma_ps_ * static_cast<double>(bytes)); }
  // A step's local work after its transfers: combining and copying at gamma
  // per byte, plus the receive overhead if it received. Both engines charge it.
  Picos step_work(const Step& step, std::uint64_t element_bytes) const {
    return step_work(local_work_elements(step), static_cast<bool>(step.recv), element_bytes);
  }
  // The same from the step's local work elements and whether it receives
  // (the simulator's StepMove carries those, not the Step).
  Picos step_work(std::uint64_t work_elements, bool receives, std::uint64_t element_bytes) const {
    return combine(work_elements * element_bytes) + (receives ? receive_overhead_ps_ : 0);
  }
  double receive_overhead() const { return receive_overhead_; }
  Ports ports() const { return ports_; }
  int levels() const { return static_cast<int>(levels_.size()); }
  const LinkCost& level(int l) const { return levels_.at(static_cast<std::size_t>(l)); }
  double gamma() const { return gamma_; }

 private:
  struct Scaled {
    Picos alpha;
    double beta;  // picoseconds per byte
    Picos overhead;
    Picos gap;
  };
  double per_byte_ps(const RankMap& layout, int level, int src, int dst) const;
  std::vector<LinkCost> levels_;
  std::vector<Scaled> scaled_;
  double gamma_;
  double gamma_ps_;
  double receive_overhead_;
  Picos receive_overhead_ps_;
  Ports ports_;
  Timing timing_ = Timing::hockney;
  NicCost nic_;
  std::shared_ptr<const NicLoad> nic_load_;
  int group_size_ = 0;
};

// One rank's ports and step clock. Both engines drive it with the same calls
// in the same order, which is what makes their virtual times identical.
class RankClock {
 public:
  explicit RankClock(Ports ports = Ports::bidirectional) : ports_(ports) {}

  void begin_step() {
    step_start_ = now_;
    step_end_ = now_;
  }
  Picos send_ready() const { return std::max(step_start_, send_port()); }
  Picos recv_ready() const { return std::max(step_start_, recv_port_); }
  void send_done(Picos end) {
    send_port() = end;
    step_end_ = std::max(step_end_, end);
  }
  void recv_done(Picos end) {
    recv_port_ = end;
    step_end_ = std::max(step_end_, end);
  }
  void end_step(Picos local_work) { now_ = step_end_ + local_work; }
  Picos now() const { return now_; }
  void reset() { *this = RankClock(ports_); }

 private:
  // With unidirectional ports a single port serves both directions.
  Picos& send_port() { return ports_ == Ports::bidirectional ? send_port_ : recv_port_; }
  Picos send_port() const { return ports_ == Ports::bidirectional ? send_port_ : recv_port_; }

  Ports ports_;
  Picos now_ = 0;
  Picos step_start_ = 0;
  Picos step_end_ = 0;
  Picos send_port_ = 0;
  Picos recv_port_ = 0;
};

// With unidirectional ports a step's send and receive share one port, so one
// must go first. Every engine uses this rule, and it is symmetric, so both
// partners of an exchange agree: with the same peer the lower rank sends
// first; otherwise the operation with the lower-ranked peer goes first.
inline bool send_goes_first(int self, const Step& step) {
  if (!step.send || !step.recv) return static_cast<bool>(step.send);
  if (step.send.peer == step.recv.peer) return self < step.send.peer;
  return step.send.peer < step.recv.peer;
}

}  // namespace copse
