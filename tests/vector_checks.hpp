#pragma once
// The v-variants' checks (issue 19: allgatherv, gatherv, scatterv,
// alltoallv), one per collective, against a sequential reference; written
// once for both Comms (runtime/communicator.hpp), the thread Comm's tests
// (test_vector_comm.cpp) and the MPI Comm's matrix (tests/mpi/mpi_vector.cpp).
// Blocks are of unequal counts, every third one empty, at displacements with
// a gap of one element after each block; the gaps must stay untouched.
// Each check returns an empty string, or what went wrong first.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/communicator.hpp"

namespace copse::testing {

// Rank v's (or pair (s, d)'s) block count around `base`: every third empty.
inline int v_count(int v, int base) { return v % 3 == 1 ? 0 : base + v % 2; }
// Element i of the block rank `from` sends for `block`.
inline std::int32_t v_value(int from, int block, std::size_t i) {
  return static_cast<std::int32_t>(from * 1000003 + block * 7919 + static_cast<std::int64_t>(i));
}
constexpr std::int32_t kGap = -7;

// Counts and gapped displacements of p blocks.
struct VLayout {
  std::vector<int> counts, displs;
  std::size_t span = 0;  // elements the user's buffer needs
  VLayout(int p, int (*count)(int, int, int), int base, int other) {
    for (int v = 0; v < p; ++v) {
      counts.push_back(count(v, base, other));
      displs.push_back(static_cast<int>(span));
      span += static_cast<std::size_t>(counts.back()) + 1;
    }
  }
};
inline int block_count(int v, int base, int) { return v_count(v, base); }
// Alltoallv: what rank s sends rank d, asymmetric; as rank me's send
// counts (block d) and receive counts (block s).
inline int pair_count(int s, int d, int base) { return v_count(s + 2 * d, base); }
inline int send_count(int d, int base, int me) { return pair_count(me, d, base); }
inline int recv_count(int s, int base, int me) { return pair_count(s, me, base); }

// A buffer of layout l holding rank `from`'s blocks (block v: v_value(from, v)), gaps kGap.
inline std::vector<std::int32_t> v_blocks(const VLayout& l, int from) {
  std::vector<std::int32_t> x(l.span + 1, kGap);
  for (std::size_t v = 0; v < l.counts.size(); ++v)
    for (std::size_t i = 0; i < static_cast<std::size_t>(l.counts[v]); ++i)
      x[static_cast<std::size_t>(l.displs[v]) + i] = v_value(from, static_cast<int>(v), i);
  return x;
}
// The first element where got differs from want, or empty.
inline std::string v_compare(const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want,
                             const char* what) {
  for (std::size_t e = 0; e < want.size(); ++e)
    if (got[e] != want[e])
      return std::string(what) + ": element " + std::to_string(e) + " is " + std::to_string(got[e]) + ", expected " +
             std::to_string(want[e]);
  return {};
}

inline std::string check_allgatherv(Comm& c, int base, bool in_place) {
  const int p = c.size(), me = c.rank();
  const VLayout l(p, block_count, base, 0);
  std::vector<std::int32_t> want(l.span + 1, kGap);
  for (int v = 0; v < p; ++v)
    for (std::size_t i = 0; i < static_cast<std::size_t>(l.counts[static_cast<std::size_t>(v)]); ++i)
      want[static_cast<std::size_t>(l.displs[static_cast<std::size_t>(v)]) + i] = v_value(v, 0, i);
  std::vector<std::int32_t> recv(l.span + 1, kGap),
      mine(static_cast<std::size_t>(l.counts[static_cast<std::size_t>(me)]) + 1);
  for (std::size_t i = 0; i + 1 < mine.size(); ++i) mine[i] = v_value(me, 0, i);
  if (in_place) {
    std::copy(mine.begin(), mine.end() - 1, recv.begin() + l.displs[static_cast<std::size_t>(me)]);
    c.allgatherv(recv.data(), recv.data(), l.counts.data(), l.displs.data(), DType::int32);
  } else {
    c.allgatherv(mine.data(), recv.data(), l.counts.data(), l.displs.data(), DType::int32);
  }
  return v_compare(recv, want, "allgatherv");
}

inline std::string check_gatherv(Comm& c, int base, int root, bool in_place) {
  const int p = c.size(), me = c.rank();
  const VLayout l(p, block_count, base, 0);
  const auto n = static_cast<std::size_t>(l.counts[static_cast<std::size_t>(me)]);
  std::vector<std::int32_t> mine(n + 1), recv(l.span + 1, kGap), want(l.span + 1, kGap);
  for (std::size_t i = 0; i < n; ++i) mine[i] = v_value(me, 0, i);
  for (int v = 0; v < p; ++v)
    for (std::size_t i = 0; i < static_cast<std::size_t>(l.counts[static_cast<std::size_t>(v)]); ++i)
      want[static_cast<std::size_t>(l.displs[static_cast<std::size_t>(v)]) + i] = v_value(v, 0, i);
  const bool here = in_place && me == root;
  if (here) std::copy(mine.begin(), mine.end() - 1, recv.begin() + l.displs[static_cast<std::size_t>(me)]);
  // Counts and displacements are the root's only: the others pass none.
  c.gatherv(here ? recv.data() : mine.data(), n, recv.data(), me == root ? l.counts.data() : nullptr,
            me == root ? l.displs.data() : nullptr, DType::int32, root);
  if (me != root) return v_compare(recv, std::vector<std::int32_t>(l.span + 1, kGap), "gatherv (not the root)");
  return v_compare(recv, want, "gatherv");
}

inline std::string check_scatterv(Comm& c, int base, int root, bool in_place) {
  const int p = c.size(), me = c.rank();
  const VLayout l(p, block_count, base, 0);
  const auto n = static_cast<std::size_t>(l.counts[static_cast<std::size_t>(me)]);
  std::vector<std::int32_t> send = me == root ? v_blocks(l, root) : std::vector<std::int32_t>{};
  const std::vector<std::int32_t> kept = send;
  std::vector<std::int32_t> recv(n + 1, kGap), want(n + 1, kGap);
  for (std::size_t i = 0; i < n; ++i) want[i] = v_value(root, me, i);
  const bool here = in_place && me == root;
  c.scatterv(me == root ? send.data() : nullptr, me == root ? l.counts.data() : nullptr,
             me == root ? l.displs.data() : nullptr, here ? send.data() : recv.data(), n, DType::int32, root);
  if (here) return v_compare(send, kept, "scatterv in place (the root's send)");
  return v_compare(recv, want, "scatterv");
}

inline std::string check_alltoallv(Comm& c, int base, bool in_place) {
  const int p = c.size(), me = c.rank();
  const VLayout out(p, send_count, base, me);
  const VLayout in(p, recv_count, base, me);
  std::vector<std::int32_t> want(in.span + 1, kGap);
  for (int s = 0; s < p; ++s)
    for (std::size_t i = 0; i < static_cast<std::size_t>(in.counts[static_cast<std::size_t>(s)]); ++i)
      want[static_cast<std::size_t>(in.displs[static_cast<std::size_t>(s)]) + i] = v_value(s, me, i);
  if (in_place) {
    // MPI's in place needs the same counts both ways: a symmetric pattern.
    std::vector<int> counts, displs;
    std::size_t span = 0;
    for (int v = 0; v < p; ++v) {
      counts.push_back((v + me) % 3 == 1 ? 0 : base + (v * me) % 2);
      displs.push_back(static_cast<int>(span));
      span += static_cast<std::size_t>(counts.back()) + 1;
    }
    std::vector<std::int32_t> x(span + 1, kGap), w(span + 1, kGap);
    for (int v = 0; v < p; ++v)
      for (std::size_t i = 0; i < static_cast<std::size_t>(counts[static_cast<std::size_t>(v)]); ++i) {
        x[static_cast<std::size_t>(displs[static_cast<std::size_t>(v)]) + i] = v_value(me, v, i);
        w[static_cast<std::size_t>(displs[static_cast<std::size_t>(v)]) + i] = v_value(v, me, i);
      }
    c.alltoallv(x.data(), counts.data(), displs.data(), x.data(), counts.data(), displs.data(), DType::int32);
    return v_compare(x, w, "alltoallv in place");
  }
  std::vector<std::int32_t> send = v_blocks(out, me), recv(in.span + 1, kGap);
  c.alltoallv(send.data(), out.counts.data(), out.displs.data(), recv.data(), in.counts.data(), in.displs.data(),
              DType::int32);
  return v_compare(recv, want, "alltoallv");
}

// Every check at counts around `base`; the first failure, or empty.
inline std::string check_vector_collectives(Comm& c, int base, int root, bool in_place) {
  for (const std::string& m : {check_allgatherv(c, base, in_place), check_gatherv(c, base, root, in_place),
                               check_scatterv(c, base, root, in_place), check_alltoallv(c, base, in_place)})
    if (!m.empty())
      return m + " (base " + std::to_string(base) + ", root " + std::to_string(root) + (in_place ? ", in place)" : ")");
  return {};
}

}  // namespace copse::testing
