#pragma once
// The cost model shared by the simulator and the emulator's virtual clock.
//
// Hockney per message: a transfer of n bytes over link level L takes
// alpha[L] + beta[L]*n; combining n received bytes into held data takes
// gamma*n; optionally every received message also costs its receiver a fixed
// overhead o (CPU time spent handling it, as in LogP), charged after the
// transfer like the combine. Levels are indexed by distance (0: same node, 1: other node; more
// levels may be appended). Ports are either bidirectional (a rank sends one
// message and receives one message at a time, concurrently) or
// unidirectional (one message at a time, in either direction).
//
// A transfer is a rendezvous: it starts when both the sender's and the
// receiver's ports are free and both ranks have reached the step holding it:
//   start = max(sender_ready, receiver_ready),  end = start + alpha + beta*n.
// A step ends at max(step start, end of its transfers) + gamma * combined bytes
// (a local copy costs gamma per byte as well).
//
// Time is kept in integer picoseconds so that virtual times are exact and
// bit-identical between engines, whatever order the host runs them in.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

using Picos = std::int64_t;
inline double to_seconds(Picos t) { return static_cast<double>(t) * 1e-12; }
inline Picos to_picos(double seconds) { return static_cast<Picos>(seconds * 1e12 + 0.5); }

enum class Ports : std::uint8_t { bidirectional, unidirectional };

struct LinkCost {
  double alpha = 0;  // seconds per message
  double beta = 0;   // seconds per byte
};

// The documented defaults (README, "The cost model"): the one place they are
// written down; configuration and the CLI read them from here.
namespace model_defaults {
inline constexpr LinkCost same_node{2e-7, 5e-11};
inline constexpr LinkCost other_node{1.5e-6, 1e-10};
inline constexpr double gamma = 2.5e-11;
inline constexpr Ports ports = Ports::bidirectional;
inline constexpr double receive_overhead = 0;
}  // namespace model_defaults

class CostModel {
 public:
  // The defaults: two levels (0: same node, 1: other node).
  CostModel() : CostModel(std::vector<LinkCost>{model_defaults::same_node, model_defaults::other_node}) {}
  explicit CostModel(std::vector<LinkCost> levels, double gamma = model_defaults::gamma,
                     Ports ports = model_defaults::ports, double receive_overhead = model_defaults::receive_overhead);

  // One-level model: every pair of ranks is `link` apart (the simulator's default).
  static CostModel uniform(LinkCost link, double gamma, Ports ports);

  Picos transfer(int level, std::uint64_t bytes) const;
  Picos combine(std::uint64_t bytes) const;
  // A step's local work after its transfers: combining and copying at gamma
  // per byte, plus the receive overhead if it received. Both engines charge it.
  Picos step_work(const Step& step, std::uint64_t element_bytes) const;
  double receive_overhead() const { return receive_overhead_; }
  Ports ports() const { return ports_; }
  int levels() const { return static_cast<int>(levels_.size()); }
  const LinkCost& level(int l) const { return levels_.at(static_cast<std::size_t>(l)); }
  double gamma() const { return gamma_; }

 private:
  struct Scaled {
    Picos alpha;
    double beta;  // picoseconds per byte
  };
  std::vector<LinkCost> levels_;
  std::vector<Scaled> scaled_;
  double gamma_;
  double gamma_ps_;
  double receive_overhead_;
  Picos receive_overhead_ps_;
  Ports ports_;
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

// The rendezvous rule: when a matched transfer ends.
inline Picos transfer_end(Picos sender_ready, Picos receiver_ready, Picos duration) {
  return std::max(sender_ready, receiver_ready) + duration;
}

// With unidirectional ports a step's send and receive share one port, so one
// must go first. Every engine uses this rule, and it is symmetric, so both
// partners of an exchange agree: with the same peer the lower rank sends
// first; otherwise the operation with the lower-ranked peer goes first.
inline bool send_goes_first(int self, const Step& step) {
  if (!step.send || !step.recv) return static_cast<bool>(step.send);
  if (step.send.peer == step.recv.peer) return self < step.send.peer;
  return step.send.peer < step.recv.peer;
}

// Local work of a step: bytes combined on receipt plus bytes copied.
inline std::uint64_t local_work_elements(const Step& step) {
  const std::uint64_t combined = (step.recv && step.combine != Combine::replace) ? step.recv.count : 0;
  return combined + step.copy.count;
}

}  // namespace copse
