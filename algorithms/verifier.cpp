#include "algorithms/verifier.hpp"

#include <map>
#include <optional>
#include <sstream>

#include "algorithms/block_layout.hpp"
#include "algorithms/simulator.hpp"
#include "common/error.hpp"

namespace copse {

namespace {

// Every rank's vector of symbolic values and what the transfers under way
// carry; the moves common to both kinds of symbol (a transfer's region as
// the sender held it, a local copy, the range checks).
template <class Value>
class HeldValues : public DataHooks {
 public:
  void on_transfer(int src, std::uint64_t, const Transfer& send, int dst, std::uint64_t dst_step,
                   const Step& dst_ops) override {
    check_range(src, send.offset, send.count, "sends");
    check_range(dst, dst_ops.recv.offset, dst_ops.recv.count, "receives into");
    (void)dst_step;
    // Receives land at the end of the receiver's step; the sender's region is
    // untouched until its own step ends, so this is its value at step start.
    const auto& from = held_[static_cast<std::size_t>(src)];
    auto& to = pending_[static_cast<std::size_t>(dst)];
    to.assign(from.begin() + static_cast<long>(send.offset),
              from.begin() + static_cast<long>(send.offset + send.count));
  }

 protected:
  HeldValues(int ranks, std::uint64_t n)
      : n_(n), held_(static_cast<std::size_t>(ranks)), pending_(static_cast<std::size_t>(ranks)) {}

  // The step's local copy (after its receive), overlapping regions included.
  void apply_copy(int rank, const Step& ops) {
    if (ops.copy.count == 0) return;
    check_range(rank, ops.copy.from, ops.copy.count, "copies from");
    check_range(rank, ops.copy.to, ops.copy.count, "copies to");
    auto& mine = held_[static_cast<std::size_t>(rank)];
    std::vector<Value> tmp(mine.begin() + static_cast<long>(ops.copy.from),
                           mine.begin() + static_cast<long>(ops.copy.from + ops.copy.count));
    std::copy(tmp.begin(), tmp.end(), mine.begin() + static_cast<long>(ops.copy.to));
  }

  void check_range(int rank, std::uint64_t offset, std::uint64_t count, const char* verb) const {
    if (offset + count > n_ || offset + count < offset) {
      std::ostringstream m;
      m << "rank " << rank << " " << verb << " elements [" << offset << ", " << offset + count
        << ") outside its vector of " << n_;
      throw ScheduleError(m.str());
    }
  }

  std::uint64_t n_;  // elements in each rank's vector
  std::vector<std::vector<Value>> held_;
  std::vector<std::vector<Value>> pending_;
};

// x_lo ⊙ x_{lo+1} ⊙ ... (len ranks, wrapping modulo p in cyclic mode);
// len == 0 marks data that no rank's input produced (a bcast receiver's
// initial buffer), which must never be combined or survive to the end.
// For a commutative algorithm a product may also be any set of ranks (lo < 0:
// set number -lo-1 of SymbolicData's table, len its size): schedules that
// pair ranks by time rather than position -- Lowery–Langou's greedy
// reductions, Proficz's arrival-sorted chain and ring -- combine x_0 ⊙ x_2
// with x_5, which no cyclic interval writes. A set that is a cyclic interval
// is always written as the interval, so each product has one representation.
struct Sym {
  std::int32_t lo = 0;
  std::int32_t len = 0;
  bool is_set() const { return lo < 0; }
};

class SymbolicData final : public HeldValues<Sym> {
 public:
  SymbolicData(const AlgorithmInfo& algorithm, const Shape& shape)
      : HeldValues(shape.ranks, vector_elements(algorithm.collective, shape)),
        shape_(shape),
        collective_(algorithm.collective),
        cyclic_(algorithm.needs_commutative),
        part_(n_, shape.blocks),
        layout_(shape) {
    for (int r = 0; r < shape.ranks; ++r) {
      auto& mine = held_[static_cast<std::size_t>(r)];
      const bool has_input = collective_ != Collective::bcast || r == shape.root;
      mine.assign(n_, has_input ? Sym{r, 1} : Sym{});
      if (collective_ == Collective::allgather)  // only its own block is a rank's input
        for (std::uint64_t e = 0; e < n_; ++e)
          if (owner(e) != r) mine[e] = Sym{};
    }
  }

  void on_step_end(int rank, std::uint64_t step, const Step& ops) override {
    auto& mine = held_[static_cast<std::size_t>(rank)];
    if (ops.recv) {
      const auto& got = pending_[static_cast<std::size_t>(rank)];
      for (std::uint64_t i = 0; i < ops.recv.count; ++i) {
        Sym& h = mine[ops.recv.offset + i];
        switch (ops.combine) {
          case Combine::replace: h = got[i]; break;
          case Combine::left: h = combine(got[i], h, rank, step, ops.recv.offset + i); break;
          case Combine::right: h = combine(h, got[i], rank, step, ops.recv.offset + i); break;
        }
      }
    }
    apply_copy(rank, ops);
  }

  // The final state: returns an empty string when correct.
  std::string check_final() const {
    const Sym everything{0, shape_.ranks};
    for (int r = 0; r < shape_.ranks; ++r) {
      if (collective_ == Collective::reduce && r != shape_.root) continue;
      const auto& mine = held_[static_cast<std::size_t>(r)];
      for (std::uint64_t e = 0; e < n_; ++e) {
        if (collective_ == Collective::reduce_scatter && owner(e) != r) continue;
        Sym expected = everything;
        if (collective_ == Collective::bcast) expected = Sym{shape_.root, 1};
        if (collective_ == Collective::allgather) expected = Sym{owner(e), 1};
        const Sym h = mine[e];
        const bool ok = h.len == expected.len && (h.lo == expected.lo || (cyclic_ && h.len == shape_.ranks));
        if (!ok) {
          std::ostringstream m;
          m << "rank " << r << " ends holding " << describe(h) << " at element " << e << where(e) << ", expected "
            << describe(expected);
          return m.str();
        }
      }
    }
    return {};
  }

 private:
  // a ⊙ b: the two products must be adjacent in rank order, covering no rank
  // twice; for commutative algorithms any two disjoint products combine.
  Sym combine(Sym a, Sym b, int rank, std::uint64_t step, std::uint64_t element) {
    const int p = shape_.ranks;
    if (a.len > 0 && b.len > 0 && a.len + b.len <= p) {
      if (!cyclic_ && a.lo + a.len == b.lo) return {a.lo, a.len + b.len};
      if (cyclic_ && !a.is_set() && !b.is_set()) {
        if ((a.lo + a.len) % p == b.lo) return {a.lo, a.len + b.len};
        if ((b.lo + b.len) % p == a.lo) return {b.lo, a.len + b.len};
      }
      if (cyclic_)
        if (const auto joined = join_sets(a, b)) return *joined;
    }
    std::ostringstream m;
    m << "rank " << rank << " step " << step << " combines " << describe(a) << " with " << describe(b) << " at element "
      << element << where(element)
      << (a.len == 0 || b.len == 0 ? ": uninitialised data" : ": not adjacent in rank order or overlapping");
    throw ScheduleError(m.str());
  }

  // The ranks of a product, as a bitset of p bits.
  std::vector<std::uint64_t> ranks_of(Sym s) const {
    if (s.is_set()) return sets_[static_cast<std::size_t>(-s.lo - 1)];
    const int p = shape_.ranks;
    std::vector<std::uint64_t> bits(static_cast<std::size_t>((p + 63) / 64), 0);
    for (int i = 0; i < s.len; ++i) {
      const int r = (s.lo + i) % p;
      bits[static_cast<std::size_t>(r / 64)] |= std::uint64_t{1} << (r % 64);
    }
    return bits;
  }

  // The union of two disjoint products (commutative mode), or nothing if they
  // overlap. Every element of a block meets the same pair, so the answer is
  // remembered per pair; sets are interned, so there are few of them.
  std::optional<Sym> join_sets(Sym a, Sym b) {
    const auto key = std::pair{pack(a), pack(b)};
    if (auto it = joined_.find(key); it != joined_.end()) return it->second;
    std::vector<std::uint64_t> bits = ranks_of(a);
    const std::vector<std::uint64_t> other = ranks_of(b);
    std::optional<Sym> result;
    bool overlap = false;
    for (std::size_t w = 0; w < bits.size(); ++w) {
      overlap = overlap || (bits[w] & other[w]) != 0;
      bits[w] |= other[w];
    }
    if (!overlap) result = canonical(std::move(bits), a.len + b.len);
    joined_.emplace(key, result);
    return result;
  }

  // `bits` (len ranks) as a cyclic interval if it is one, else as an interned set.
  Sym canonical(std::vector<std::uint64_t> bits, std::int32_t len) {
    const int p = shape_.ranks;
    auto has = [&](int r) { return (bits[static_cast<std::size_t>(r / 64)] >> (r % 64)) & 1; };
    for (int lo = 0; lo < p; ++lo)  // an interval starts where its predecessor is missing
      if (has(lo) && (len == p || !has((lo + p - 1) % p))) {
        int i = 0;
        while (i < len && has((lo + i) % p)) ++i;
        if (i == len) return {lo, len};
        break;
      }
    const auto [it, added] = set_index_.emplace(bits, static_cast<std::int32_t>(sets_.size()));
    if (added) sets_.push_back(std::move(bits));
    return {-it->second - 1, len};
  }

  static std::uint64_t pack(Sym s) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(s.lo)) << 32) | static_cast<std::uint32_t>(s.len);
  }

  // The rank whose block holds element e (allgather, reduce_scatter).
  int owner(std::uint64_t e) const { return layout_.owner(e); }

  std::string describe(Sym s) const {
    if (s.len == 0) return "nothing";
    if (s.is_set()) {  // {x_0, x_2, x_5}
      const auto bits = ranks_of(s);
      std::string text;
      int shown = 0;
      for (int r = 0; r < shape_.ranks; ++r) {
        if (!((bits[static_cast<std::size_t>(r / 64)] >> (r % 64)) & 1)) continue;
        if (shown++ == 8) return text + ", ... (" + std::to_string(s.len) + " ranks)}";
        text += (shown == 1 ? "{x_" : ", x_") + std::to_string(r);
      }
      return text + "}";
    }
    const int last = (s.lo + s.len - 1) % shape_.ranks;
    return s.len == 1 ? "x_" + std::to_string(s.lo) : "x_" + std::to_string(s.lo) + "..x_" + std::to_string(last);
  }

  // " (block j)" for the pipeline block holding element e.
  std::string where(std::uint64_t e) const {
    long lo = 0, hi = part_.blocks - 1;
    while (lo < hi) {
      const long mid = (lo + hi + 1) / 2;
      if (part_.offset(mid) <= e)
        lo = mid;
      else
        hi = mid - 1;
    }
    return " (block " + std::to_string(lo) + " of " + std::to_string(part_.blocks) + ")";
  }

  Shape shape_;
  Collective collective_;
  bool cyclic_;
  BlockPartition part_;
  BlockLayout layout_;  // where each rank's block is (allgather, reduce_scatter; unequal with Shape::counts)
  // Commutative products that are not cyclic intervals (Sym::is_set).
  std::vector<std::vector<std::uint64_t>> sets_;
  std::map<std::vector<std::uint64_t>, std::int32_t> set_index_;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::optional<Sym>> joined_;
};

bool moves_data_only(Collective c) {
  return c == Collective::scatter || c == Collective::gather || c == Collective::alltoall;
}

// The data-movement collectives (scatter, gather, alltoall): nothing
// combines, so an element's symbol is where it started -- element e of
// rank s's vector -- and the end state names each element's exact origin:
// every block at its place, its elements in order.
class MovementData final : public HeldValues<std::uint64_t> {
 public:
  MovementData(Collective collective, const Shape& shape)
      : HeldValues(shape.ranks, vector_elements(collective, shape)),
        collective_(collective),
        shape_(shape),
        layout_(shape) {
    for (int r = 0; r < shape.ranks; ++r) {
      auto& mine = held_[static_cast<std::size_t>(r)];
      mine.assign(n_, kNothing);
      // The input: the root's every block (scatter), the rank's own block
      // (gather), the rank's send area (alltoall); blocks packed, of unequal
      // sizes with Shape::counts (algorithms/block_layout.hpp).
      std::uint64_t lo = 0, hi = 0;
      if (collective == Collective::scatter && r == shape.root) hi = layout_.total();
      if (collective == Collective::gather) lo = layout_.offset(r), hi = lo + layout_.size(r);
      if (collective == Collective::alltoall) hi = AlltoallLayout(shape, r).send().total();
      for (std::uint64_t e = lo; e < hi; ++e) mine[e] = origin(r, e);
    }
  }

  void on_step_end(int rank, std::uint64_t step, const Step& ops) override {
    if (ops.recv) {
      if (ops.combine != Combine::replace) {
        std::ostringstream m;
        m << "rank " << rank << " step " << step << " combines what it receives, in a " << to_string(collective_)
          << ", which only moves data";
        throw ScheduleError(m.str());
      }
      const auto& got = pending_[static_cast<std::size_t>(rank)];
      std::copy(got.begin(), got.end(),
                held_[static_cast<std::size_t>(rank)].begin() + static_cast<long>(ops.recv.offset));
    }
    apply_copy(rank, ops);
  }

  // The final state: returns an empty string when correct.
  std::string check_final() const {
    std::vector<AlltoallLayout> areas;  // alltoall: every rank's two areas
    if (collective_ == Collective::alltoall)
      for (int r = 0; r < shape_.ranks; ++r) areas.emplace_back(shape_, r);
    for (int r = 0; r < shape_.ranks; ++r) {
      const auto& mine = held_[static_cast<std::size_t>(r)];
      const std::uint64_t block = layout_.offset(r), end = block + layout_.size(r);
      auto wrong = [&](std::uint64_t e, std::uint64_t expected) {
        std::ostringstream m;
        m << "rank " << r << " ends holding " << describe(mine[e]) << " at element " << e << ", expected "
          << describe(expected);
        return m.str();
      };
      if (collective_ == Collective::scatter)  // its own block of the root's vector
        for (std::uint64_t e = block; e < end; ++e)
          if (mine[e] != origin(shape_.root, e)) return wrong(e, origin(shape_.root, e));
      if (collective_ == Collective::gather && r == shape_.root)  // every rank's own block
        for (std::uint64_t e = 0; e < layout_.total(); ++e)
          if (mine[e] != origin(layout_.owner(e), e)) return wrong(e, origin(layout_.owner(e), e));
      if (collective_ != Collective::alltoall) continue;
      // Receive block s: rank s's send block r, element by element.
      const BlockLayout& received = areas[static_cast<std::size_t>(r)].recv();
      for (int s = 0; s < shape_.ranks; ++s) {
        const std::uint64_t from = areas[static_cast<std::size_t>(s)].send().offset(r);
        for (std::uint64_t i = 0; i < received.size(s); ++i) {
          const std::uint64_t e = received.offset(s) + i, expected = origin(s, from + i);
          if (mine[e] != expected) return wrong(e, expected);
        }
      }
    }
    return {};
  }

 private:
  static constexpr std::uint64_t kNothing = 0;
  // Element e of rank r's vector as it started (e < 2^32: the verifier's size limit).
  static std::uint64_t origin(int r, std::uint64_t e) { return (static_cast<std::uint64_t>(r) + 1) << 32 | e; }
  static std::string describe(std::uint64_t symbol) {
    if (symbol == kNothing) return "nothing";
    return "rank " + std::to_string((symbol >> 32) - 1) + "'s element " + std::to_string(symbol & 0xffffffffU);
  }

  Collective collective_;
  Shape shape_;
  BlockLayout layout_;  // scatter's and gather's blocks
};

// Runs `plan` against `data`, returning its verdict.
template <class Data>
VerifyResult prove(const SchedulePlan& plan, const Shape& shape, Data& data) {
  SimulationOptions options;
  simulate(plan, shape.ranks, options, &data);
  auto failure = data.check_final();
  return {failure.empty(), failure};
}

}  // namespace

VerifyResult verify(const AlgorithmInfo& algorithm, const Shape& shape) {
  validate_shape(algorithm, shape);
  return verify(algorithm, algorithm.plan(shape), shape);
}

VerifyResult verify(const AlgorithmInfo& algorithm, const SchedulePlan& plan, const Shape& shape) {
  validate_shape(algorithm, shape);
  // Every element of every rank holds a symbolic value (8 bytes).
  constexpr std::uint64_t kMaxSymbols = std::uint64_t{1} << 28;
  const auto ranks = static_cast<std::uint64_t>(shape.ranks);
  if (shape.count > kMaxSymbols || vector_elements(algorithm.collective, shape) > kMaxSymbols / ranks)
    throw UsageError(
        "the verifier tracks every element of every rank symbolically: ranks x vector length must be "
        "at most " +
        std::to_string(kMaxSymbols) + " (got " + std::to_string(shape.ranks) + " ranks, " +
        std::to_string(shape.count) + " elements each)");
  try {
    if (moves_data_only(algorithm.collective)) {
      MovementData data(algorithm.collective, shape);
      return prove(plan, shape, data);
    }
    SymbolicData data(algorithm, shape);
    return prove(plan, shape, data);
  } catch (const ScheduleError& e) {
    return {false, e.what()};
  } catch (const std::logic_error& e) {
    return {false, e.what()};
  }
}

}  // namespace copse
