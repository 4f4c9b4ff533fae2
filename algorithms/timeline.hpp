#pragma once
// Timelines: what each rank did when, and two pictures of it.
//
// An engine asked to record one (SimulationOptions::timeline, the emulator's
// EmulatorConfig::record_timeline) appends one TimelineEvent per send, per
// receive and per step's local work, in virtual time; the emulator also
// stamps each with the wall clock. Both engines place the bars by the same
// rule, from what each rank knows alone, so the emulator's virtual timeline
// equals the simulator's:
//   - a transfer's bar ends when the transfer ends for that side
//     (TransferEnds) and starts at max(ready, end - busy), where `ready` is
//     when that side's port was free for it and `busy` the time the transfer
//     occupies the port when both sides are ready at once. Under Hockney that
//     is the rendezvous itself, [max(sender ready, receiver ready), end];
//     under LogGP the sender's bar is its o + G·n and the receiver's the
//     last o + G·n before its end. Waiting for the partner is a gap;
//   - local work (combining, copying, the receive overhead) is the step's
//     last stretch, [end of its transfers, end of the step].
//
// The pictures:
//   - write_gantt_svg: one row per rank, sends, receives and local work as
//     bars over virtual time, coloured by where in the vector the data lies
//     (by block when the vector is cut into equal blocks), with a time axis
//     and a legend; hand-written SVG, viewable in any browser;
//   - write_chrome_trace: Chrome-trace / Perfetto JSON ("traceEvents", ph "X"
//     complete events, ts and dur in microseconds) with virtual time as one
//     process and, for the emulator, wall time as another.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "common/cost_model.hpp"

namespace copse {

enum class Activity : std::uint8_t {
  send,
  recv,
  combine,  // a step's local work that combines received data (with any copy and receive overhead)
  local,    // a step's local work without a combine: a copy, or the receive overhead alone
};
std::string_view to_string(Activity a);

struct TimelineEvent {
  int rank = 0;
  Activity activity = Activity::send;
  std::int32_t peer = -1;               // the other rank of a transfer; for a combine, the rank it received from
  std::uint64_t step = 0;               // index in the rank's schedule
  std::uint64_t offset = 0, count = 0;  // elements moved or combined (for a copy: its target)
  Picos start = 0, end = 0;             // virtual time
  // Wall clock (steady_clock, nanoseconds since its epoch), when recorded by
  // an engine that runs on real data; both 0 otherwise.
  std::int64_t wall_start_ns = 0, wall_end_ns = 0;
};
using Timeline = std::vector<TimelineEvent>;

// The bar of a transfer side (see the top of this file): ready when its port
// was free for it, ending at `end`, occupying the port for `busy`.
inline Picos bar_start(Picos ready, Picos end, Picos busy) { return std::max(ready, end - busy); }
// `busy` for a transfer of `bytes` from src to dst: how long it takes when
// both sides are ready at time 0 (the sender's end).
inline Picos transfer_busy(const CostModel& model, const RankMap& layout, int src, int dst, std::uint64_t bytes) {
  return model.transfer_ends(layout, src, dst, bytes, 0, 0).send_end;
}

// The local-work event of a step that ended its transfers at `from` and its
// local work at `to` (none when `to == from`). Appended to `out`.
void add_local_work(Timeline& out, int rank, std::uint64_t step, const Step& s, Picos from, Picos to);

struct GanttOptions {
  std::string title;
  std::uint64_t vector_elements = 0;  // the vector's length (colours by position in it); 0: from the events
  int segments = 8;                   // colour classes: equal parts of the vector (the block count, if known)
  int max_rows = 64;                  // ranks drawn; above it, the first max_rows ranks and a note saying so
  int width = 1200;                   // pixels of the time axis
  std::vector<int> node_of;           // each rank's node (a line between nodes); empty: none drawn
};
// GanttOptions::segments for a schedule of `blocks` blocks in each of `parts`
// parts: a colour per block when it pipelines, else eighths of the vector
// (which shows which half a recursive halving moves); at most 64.
inline int gantt_segments(int blocks, int parts) {
  const int n = blocks * parts;
  return n > 1 ? std::min(n, 64) : 8;
}

// One row per rank of `ranks`: sends (upper half), receives (lower half) and
// local work (a thin dark strip under them). Bars closer than half a pixel
// with the same colour are merged, so the file stays small at any p.
void write_gantt_svg(std::ostream& out, const Timeline& timeline, int ranks, const GanttOptions& options);

struct TraceOptions {
  std::string name;  // the run, e.g. "allreduce ring, 32 ranks" (the process names add which clock)
  bool wall = true;  // also the wall-clock process (when the events carry wall times)
};
// Chrome-trace JSON: {"traceEvents": [...], "displayTimeUnit": "ns"}. pid 1
// is virtual time, pid 2 wall time (from the first recorded wall start);
// each rank has three threads, tid 3r (sends), 3r+1 (receives), 3r+2 (local
// work), named "rank r send" etc. -- a rank's send and receive overlap in
// time, and complete events on one thread must nest. Every event's args hold
// rank, step, peer, offset, count and the exact virtual start_ps and end_ps.
void write_chrome_trace(std::ostream& out, const Timeline& timeline, int ranks, const TraceOptions& options);

// Writes a picture to `path` through `write`; UsageError naming `option`
// (e.g. "--gantt") when the file cannot be opened, SystemError when writing fails.
void write_picture_file(std::string_view option, const std::string& path,
                        const std::function<void(std::ostream&)>& write);

}  // namespace copse
