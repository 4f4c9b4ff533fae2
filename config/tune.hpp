#pragma once
// Making a decision table (config/decision_table.hpp) from measurements:
// `copse tune`'s rules (issue 18, item 1). The measurements are the pooled
// CSV of bench/mpi_collectives (its --report --csv): per shape, collective,
// call form and size, the MPI library's time over copse's by median
// (tuned/copse; above 1 copse is faster), copse measured with no table so
// that it served every call. A CSV without a form column (from before the
// forms) measured the blocking calls.
//
// The rules:
//  - Use. copse serves a call where tuned/copse by median >= threshold (0.95
//    by default: within the noise of a shared machine copse counts as no
//    slower), the MPI library elsewhere; a call no row matches goes to the
//    library (default = "mpi").
//  - Shapes. npP is P processes on one node, npP-vnK the same on virtual
//    nodes of K ranks (hierarchy.ranks_per_node), npP-hN P processes on N
//    hosts. The one-node shapes cover communicators of P ranks up to the next
//    measured P (the smallest from 2 ranks, the largest without bound), all
//    of one node; the virtual-node ones likewise by ranks, every
//    communicator of two or more nodes on one host (max_hosts 1); the
//    several-host ones likewise, every communicator of two or more hosts
//    (min_hosts 2). Virtual nodes and real hosts are measured apart: Open
//    MPI's shared memory between virtual nodes is no network.
//  - Sizes. A measured size decides the band up to the integer geometric
//    mean with the next measured size; adjacent bands that decide alike are
//    one row, whose note lists the ratios it stands for. Where two
//    neighbours decide differently, `copse tune --refine` measures the size
//    at their edge too (tune_refinements, below).
//  - Noise. A band whose ratio lies within the noise of the threshold
//    (threshold * noise <= ratio < threshold / noise; noise 0.8 by default)
//    and whose two neighbouring bands decide alike decides as they do: on a
//    shared machine one size's median swings by that much from run to run
//    (A/A runs of one library at np 4 on 2 cores: 0.82 to 1.44), and a lone
//    band deferred between two served ones (or the reverse) is more likely
//    that swing than the library. noise 1 turns the rule off; a band
//    further off stays as measured, the first and last bands too.
//  - Hierarchy forms and block counts. On a shape of several nodes copse may
//    also be measured planning in other hierarchy forms (labels copse-FORM:
//    `copse tune --hierarchy-forms`, hierarchy.form set on that side) and,
//    from a size up, with fixed pipeline block counts (labels copse-bN:
//    `copse tune --block-counts`, collectives.blocks set). A size takes such
//    a variant where it beats copse as configured (label copse) by more than
//    the noise (its ratio above the configured one's / noise), a later
//    variant (by block count, none first, then by form in the order flat,
//    leader, multi-leader, lanes, auto) replacing an earlier one only where
//    it beats that by more than the noise too -- auto often chooses lanes
//    itself, and two variants within the noise of each other would otherwise
//    alternate from size to size -- and its row names the form
//    (`hierarchy`) and the block count (`blocks`); elsewhere neither. The
//    size's ratio is then that variant's, for every rule here. Across two
//    hosts of two processes a bcast of 64 KiB to 1 MiB took 36-582 us in
//    lanes against 106-1211 in the leader form, while no other form helped
//    allreduce there; a reduce of 1 MiB took 617-652 us in 4 blocks against
//    1299-1340 in the 1 block the model chose.
//  - Barrier has no bytes: one row per shape, by the median of its ratios.
//  - MPI_Reduce_scatter (unequal counts), when not measured, repeats
//    reduce_scatter_block's rows: their bytes (the whole input per process)
//    measure the same.
//  - Forms. Every row names its call form (blocking, nonblocking,
//    persistent); a measured form's rows come from its own ratios. A form
//    not measured at a shape and collective:
//      persistent, with nonblocking measured, repeats nonblocking's rows: the
//        library's persistent collectives are its nonblocking schedules
//        (Open MPI's libnbc) made once, copse's its nonblocking ones planned
//        once, so both sides gain alike;
//      otherwise (nonblocking, or persistent without nonblocking) comes from
//        the blocking ratios with the threshold lowered to threshold *
//        unmeasured (0.7 by default): copse serves where its blocking call
//        was at most about 1/0.7 = 1.4x slower than the library's blocking
//        call. Not "mpi" wherever the blocking call deferred, because the
//        library's nonblocking path is other, slower code than the blocking
//        call measured (Open MPI 4.1 here, np 2: libnbc's persistent
//        Start+Wait 1.85x tuned's MPI_Allreduce at 8 B, 1.43x at 2 KiB),
//        while copse's nonblocking path runs its blocking schedule; not
//        "copse" everywhere either, because where copse's blocking call was
//        far slower (0.01x for small bcasts at np 4 on 2 cores) that is a
//        slow path of copse's own, which its nonblocking call shares. Such
//        rows' notes say which ratios they stand for and that the form was
//        not measured.
//  - Rows go in the order: hand-written rows (no `shape`) first, then the
//    shapes by name, within a shape by collective, within a collective by
//    form (blocking, nonblocking, persistent), within a form by size.
//
// Merging with an earlier table (tune_table's `previous`): a shape measured
// now replaces that shape's rows; the other shapes' rows are kept, their rank
// and node ranges recomputed over every shape the table then has; the rows
// written by hand and the default are kept as they were.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/decision_table.hpp"

namespace copse {

struct TuneShape {
  std::string name;        // "np4", "np4-vn2", "np8-h2"
  int ranks = 0;           // P
  int ranks_per_node = 0;  // K of npP-vnK (virtual nodes); 0: none
  int hosts = 1;           // N of npP-hN
  bool multi_node() const { return ranks_per_node > 0 || hosts > 1; }
};
// Reads a shape's name; a UsageError says what is wrong with it.
TuneShape parse_tune_shape(std::string_view name);

// A way copse was measured besides its configuration (a side labelled
// copse-...): planning in another hierarchy form, with a fixed pipeline
// block count, or both.
struct TuneVariant {
  std::optional<Form> form;  // none: the configured form
  int blocks = 0;            // 0: the configured block count
  // "copse-lanes", "copse-b16", "copse-lanes-b16".
  std::string label() const;
  // "in lanes", "with 16 blocks", "in lanes with 16 blocks": a row note's words.
  std::string text() const;
  // The "Hierarchy forms" rule's order: by block count (none first), then by
  // form (flat, leader, multi-leader, lanes, auto).
  bool operator<(const TuneVariant& o) const { return blocks != o.blocks ? blocks < o.blocks : form < o.form; }
  bool operator==(const TuneVariant&) const = default;
};
// The variant of a label "copse-..." (none for "copse" itself); a
// UsageError says what is wrong with another.
std::optional<TuneVariant> tune_variant_of(std::string_view label);

// tuned/copse by median at one size: copse as configured (label "copse";
// 0: not measured) and in the variants measured (labels "copse-...").
struct TuneRatio {
  double configured = 0;
  std::map<TuneVariant, double> variants;
  // The variant the "Hierarchy forms" rule chooses (none: as configured) and
  // its ratio.
  std::pair<std::optional<TuneVariant>, double> chosen(double noise) const;
  // The best ratio of any variant measured.
  double best() const;
};
// tuned/copse by median: shape name -> collective -> call form -> bytes -> ratios.
using TuneSizes = std::map<std::uint64_t, TuneRatio>;
using TuneRatios = std::map<std::string, std::map<MpiCollective, std::map<CallForm, TuneSizes>>>;

// The unmeasured forms' factor on the threshold (the header's "Forms" rule).
inline constexpr double kTuneUnmeasured = 0.7;

// The copse rows of a pooled CSV (labels "copse" and "copse-..." of
// TuneVariant::label; root 0 or none; the rows of other labels and roots
// are not decisions). A malformed file or line is a
// UsageError naming `source`, the line and the reason; a copse row whose
// result was wrong (verified false) is a RunFailure.
TuneRatios read_tune_csv(std::istream& in, const std::string& source);

// The table the rules make from `ratios`, merged with `previous` when given
// (whose rows' shapes must be names parse_tune_shape reads); `unmeasured`:
// the "Forms" rule's factor.
DecisionTable tune_table(const TuneRatios& ratios, double threshold, double noise,
                         const std::optional<DecisionTable>& previous, double unmeasured = kTuneUnmeasured);

// Where a measurement between two measured sizes would move a band edge
// (`copse tune --refine`): per shape, the collectives with two neighbouring
// sizes (of one measured form; each size by its best variant's ratio)
// on either side of `threshold`, and for each such pair the size the
// edge between them sits at (their integer geometric mean, whole floats),
// when it lies strictly between them. Measured, it decides the half band up
// to it, and the next refinement halves what is left: e.g. 512 KiB serving
// and 2 MiB deferring ask for 1 MiB, whose measurement moves the edge to 724
// KiB or 1448 KiB. Barrier has no sizes and asks for none.
struct TuneRefinement {
  std::set<MpiCollective> collectives;
  std::set<std::uint64_t> sizes;
};
std::map<std::string, TuneRefinement> tune_refinements(const TuneRatios& ratios, double threshold);

// Adds `from`'s measurements to `into`, a size measured in both taking `from`'s.
void merge_tune_ratios(TuneRatios& into, const TuneRatios& from);

}  // namespace copse
