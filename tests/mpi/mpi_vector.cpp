// copse_mpi_tests's v-variants (issue 19): allgatherv, gatherv, scatterv and
// alltoallv through the MPI Comm against the sequential reference of
// tests/vector_checks.hpp (shared with the thread Comm's tests): counts
// around 0, 1, p-1, p+1 and 1000 (every third block empty, gapped
// displacements), roots cycling, in place on alternate calls, and blocks of
// just over 2^20 bytes once.
#include "mpi_checks.hpp"
#include "tests/vector_checks.hpp"

namespace mpi_tests {

void run_vector(Comm& c, bool large) {
  const int p = c.size();
  int i = 0;
  for (int base : {0, 1, p - 1, p + 1, 1000})
    for (bool in_place : {false, true}) {
      const int root = (i++ * 3 + 1) % p;
      guarded(c, "vector", [&] {
        const std::string failure = copse::testing::check_vector_collectives(c, base, root, in_place);
        expect(failure.empty(), where(c, failure));
      });
    }
  if (!large) return;
  guarded(c, "vector, large", [&] {
    const std::string failure = copse::testing::check_vector_collectives(c, (1 << 18) + 3, p - 1, false);
    expect(failure.empty(), where(c, failure));
  });
}

}  // namespace mpi_tests
