#pragma once
// Schedule files: trees and step lists written by a user and loaded at run
// time, with no recompilation -- Bjørndalen et al.'s scripted reduce and
// broadcast trees for LAM-MPI (their §4: per rank, "receive (and combine)
// from 13, receive from 14, send to 8"). README.md, "Schedule files",
// documents the format; in short:
//
//   # two groups of four per node, each leader straight to rank 0
//   ranks 8
//   tree
//   0: 1 2 3 4        # rank 0 receives from 1, 2, 3, 4 in this order
//   4: 5 6 7
//
// or, written out step by step (one line = one step of that rank; a send and
// a receive on one line run concurrently):
//
//   ranks 2
//   collective allreduce
//   blocks 2
//   steps
//   0: recv 1 block 0 combine
//   0: recv 1 block 1 combine, send 1 block 0
//   ...
//
// A file becomes an ordinary schedule (common/schedule.hpp): the tree form
// runs the pipelined tree reduce and broadcast of algorithms/patterns.hpp over
// the user's tree, the step form yields its steps with block numbers turned
// into element ranges. So the one executor, the simulator and the verifier
// run it, and every file is proven by the verifier, for the exact shape it is
// run with, before any engine runs it.
//
// Every error is a UsageError reading "FILE:LINE: what is wrong" (just "FILE:
// ..." when no line is to blame, e.g. an unreadable file).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/schedule.hpp"

namespace copse {

struct AlgorithmInfo;  // algorithms/registry.hpp

// A transfer as the file writes it: blocks first..last (inclusive) of the
// file's partition, with `peer`.
struct BlockRange {
  int peer = -1;  // -1: none
  int first = 0;
  int last = 0;
};

struct FileStep {
  BlockRange send;
  BlockRange recv;
  Combine combine = Combine::replace;
  int line = 0;
};

struct ScheduleFile {
  enum class Form { tree, steps };

  std::string path;  // as given: every message starts with it
  Form form = Form::tree;
  int ranks = 0;
  int ranks_line = 0;
  // The collectives the file serves. A tree serves allreduce, reduce, bcast
  // and barrier unless a `collective` line names fewer; a step list serves
  // the one its `collective` line names (an allreduce's also the barrier, a
  // one-element allreduce).
  std::vector<Collective> collectives;
  int collective_line = 0;  // 0: no `collective` line
  int body_line = 0;        // the `tree` or `steps` line

  // Tree form: parent[r] (-1 at the root), children[r] in the order r
  // receives (combines) them; line_of[r] is the line that lists r's children,
  // or for a leaf the line that lists r as a child.
  int root = 0;
  std::vector<int> parent;
  std::vector<std::vector<int>> children;
  std::vector<int> line_of;

  // Step form: the partition's block count, the root of a reduce or bcast,
  // and each rank's steps in order.
  int blocks = 1;
  int steps_root = 0;
  int root_line = 0;  // 0: no `root` line (the root is 0)
  std::vector<std::vector<FileStep>> steps;
  std::vector<int> first_line;  // per rank: its first line (every rank has one)

  bool serves(Collective c) const;
};

// Limits that keep loading, proving and fuzzing bounded.
inline constexpr int kScheduleFileMaxRanks = 1 << 16;
inline constexpr int kScheduleFileMaxBlocks = 1 << 16;
inline constexpr std::uint64_t kScheduleFileMaxRankBlocks = std::uint64_t{1} << 20;  // ranks x blocks (step form)
inline constexpr std::uint64_t kScheduleFileMaxBytes = std::uint64_t{16} << 20;

// Parses `text` as the contents of `path` and checks its structure: syntax,
// ranks and peers in range, every rank present, a tree with one root and no
// cycle, no child listed twice, at most one send and one receive per step.
// Whether the schedule is correct is the verifier's to say (schedule_file_plan
// and file_algorithm below). Throws UsageError "path:line: ...".
ScheduleFile parse_schedule_file(std::string_view text, const std::string& path);

// The text of the file at `path` (UsageError if it cannot be read or is
// larger than kScheduleFileMaxBytes), and the same parsed.
std::string read_schedule_text(const std::string& path);
ScheduleFile read_schedule_file(const std::string& path);

// The file's schedule for `collective` and `shape`, without proof. The tree
// form honours shape.blocks; the step form uses its own blocks. Throws
// UsageError "path:line: ..." when the file does not serve the collective or
// the shape does not fit it (rank count, root).
SchedulePlan schedule_file_plan(std::shared_ptr<const ScheduleFile> file, Collective collective, const Shape& shape);

// The registry entry for the file at `path` serving `collective`: named
// "file:PATH", commutative-only exactly when the verifier proves it only for
// commutative operators, pipelined for the tree form. Loading proves the file
// for its own rank count; its plan proves every further shape (cached) before
// returning it, so no engine ever runs an unproven file. find_algorithm
// (algorithms/registry.hpp) answers "file:PATH" names with this. Thread-safe;
// entries live as long as the process (a file whose text changes becomes a
// new entry).
const AlgorithmInfo& file_algorithm(Collective collective, std::string_view path);

// "file:" -- the prefix that names a schedule file where an algorithm name goes.
inline constexpr std::string_view kScheduleFilePrefix = "file:";

}  // namespace copse
