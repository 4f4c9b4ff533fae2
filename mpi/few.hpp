#pragma once
// `n` values of T, zero-initialised: on the stack for a few, on the heap for
// more -- so that the request calls' wait for one persistent call (MPI_Wait,
// MPI_Waitall and their Fortran spellings) allocates nothing. Private to
// libcopse_mpi.so.

#include <array>
#include <cstddef>
#include <vector>

namespace copse::mpi::interposer {

template <class T>
class Few {
 public:
  explicit Few(int n) : heap_(n > kFew ? static_cast<std::size_t>(n) : 0) {}
  T* data() { return heap_.empty() ? stack_.data() : heap_.data(); }
  T& operator[](int i) { return data()[i]; }

 private:
  static constexpr int kFew = 16;
  std::array<T, kFew> stack_{};
  std::vector<T> heap_;
};

}  // namespace copse::mpi::interposer
