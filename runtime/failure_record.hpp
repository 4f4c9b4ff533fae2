#pragma once
// The first failure of a run of many ranks, written once for the thread Team
// (runtime/comm.cpp), the MPI Team (runtime/mpi_failure.cpp, which also
// shares it with the node's other processes) and the emulator
// (emulator/emulator.cpp): the first error recorded is kept, later ones are
// dropped (they are the echoes of the first: a peer that gave up waiting, a
// rank aborted), and every rank that stops rethrows the kept one, so all
// ranks report the same cause.

#include <exception>
#include <mutex>
#include <utility>

namespace copse {

class FailureRecord {
 public:
  // Keeps `error` if no failure is kept yet; whether it was kept.
  bool record(std::exception_ptr error) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (first_) return false;
    first_ = std::move(error);
    return true;
  }
  // The kept failure (null: none yet).
  std::exception_ptr first() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }
  // Rethrows the kept failure, if there is one.
  void rethrow_if_any() const {
    if (std::exception_ptr e = first()) std::rethrow_exception(e);
  }

 private:
  mutable std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace copse
