#pragma once
// An MPI call of copse's own that failed, as a copse::Error.

#include <mpi.h>

#include <string>
#include <string_view>

#include "common/error.hpp"

namespace copse::mpi {

// Throws SystemError "CALL failed: <the MPI library's text for rc>" unless rc
// is MPI_SUCCESS.
inline void check_mpi(int rc, std::string_view call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (PMPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  throw SystemError(std::string(call) + " failed: " +
                    (length > 0 ? std::string(text, static_cast<std::size_t>(length)) : "error " + std::to_string(rc)));
}

}  // namespace copse::mpi
