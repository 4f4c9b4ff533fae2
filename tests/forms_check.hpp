#pragma once
// One collective on one rank of any Comm (thread or MPI), checked against the
// sequential reference: what tests/test_comm_forms.cpp and
// tests/mpi/test_mpi_forms.cpp run in every form. Reduce goes to the last
// rank, bcast comes from rank 1 (teams of two or more ranks).

#include <cstring>
#include <string>
#include <vector>

#include "common/reduce_op.hpp"
#include "common/schedule.hpp"

namespace copse::testing {

using FormBytes = std::vector<std::byte>;

// Whether the result is right; `allreduce` receives an allreduce's result.
template <class CommT>
bool check_collective(CommT& comm, Collective c, const ReduceOp& op, std::uint64_t n, FormBytes& allreduce) {
  const int p = comm.size(), r = comm.rank();
  const std::size_t eb = op.element_bytes, bytes = n * eb, pz = static_cast<std::size_t>(p);
  const std::size_t scalars = bytes / dtype_size(op.dtype);
  FormBytes mine(bytes), out(bytes, std::byte{0xA5});
  fill_input(op, r, n, mine.data());
  auto same = [](const FormBytes& got, const std::byte* want, std::size_t size) {
    return size == 0 || std::memcmp(got.data(), want, size) == 0;
  };
  switch (c) {
    case Collective::allreduce:
      comm.allreduce(mine.data(), out.data(), n, op);
      allreduce = out;
      return same(out, reference_result(op, p, n).data(), bytes);
    case Collective::reduce:
      comm.reduce(mine.data(), out.data(), n, op, p - 1);
      return r != p - 1 || same(out, reference_result(op, p, n).data(), bytes);
    case Collective::bcast: {
      FormBytes want(bytes);
      fill_input(op, 1, n, want.data());
      FormBytes buffer = r == 1 ? want : FormBytes(bytes, std::byte{0xA5});
      comm.bcast(buffer.data(), scalars, op.dtype, 1);
      return same(buffer, want.data(), bytes);
    }
    case Collective::barrier: comm.barrier(); return true;
    case Collective::allgather: {
      FormBytes want(pz * bytes), all(pz * bytes, std::byte{0xA5});
      for (int q = 0; q < p; ++q) fill_input(op, q, n, want.data() + static_cast<std::size_t>(q) * bytes);
      comm.allgather(mine.data(), all.data(), scalars, op.dtype);
      return same(all, want.data(), pz * bytes);
    }
    case Collective::reduce_scatter: {
      FormBytes send(pz * bytes);
      fill_input(op, r, n * pz, send.data());
      comm.reduce_scatter_block(send.data(), out.data(), n, op);
      return same(out, reference_result(op, p, n * pz).data() + static_cast<std::size_t>(r) * bytes, bytes);
    }
    case Collective::scatter:  // not served by a Comm yet (issue 19)
    case Collective::gather:
    case Collective::alltoall: break;
  }
  return false;
}

}  // namespace copse::testing
