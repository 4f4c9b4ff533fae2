#pragma once
// One collective on one rank of any Comm (thread or MPI), checked against the
// sequential reference: what tests/test_comm_forms.cpp and
// tests/mpi/test_mpi_forms.cpp run in every form. Reduce goes to the last
// rank, bcast comes from rank 1 (teams of two or more ranks), and so do
// gather and scatter.

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
    case Collective::scatter: {  // from rank 1: rank q's block of rank 1's p blocks
      FormBytes all(pz * bytes);
      fill_input(op, 1, n * pz, all.data());
      comm.scatter(all.data(), out.data(), scalars, op.dtype, 1);
      return same(out, all.data() + static_cast<std::size_t>(r) * bytes, bytes);
    }
    case Collective::gather: {  // to the last rank
      FormBytes want(pz * bytes), all(pz * bytes, std::byte{0xA5});
      for (int q = 0; q < p; ++q) fill_input(op, q, n, want.data() + static_cast<std::size_t>(q) * bytes);
      comm.gather(mine.data(), all.data(), scalars, op.dtype, p - 1);
      return r != p - 1 || same(all, want.data(), pz * bytes);
    }
    case Collective::alltoall: {  // rank q sends block d of its p blocks to rank d
      FormBytes send(pz * bytes), got(pz * bytes, std::byte{0xA5}), want(pz * bytes), theirs(pz * bytes);
      fill_input(op, r, n * pz, send.data());
      for (int q = 0; q < p; ++q) {
        fill_input(op, q, n * pz, theirs.data());
        if (bytes)
          std::memcpy(want.data() + static_cast<std::size_t>(q) * bytes,
                      theirs.data() + static_cast<std::size_t>(r) * bytes, bytes);
      }
      comm.alltoall(send.data(), got.data(), scalars, op.dtype);
      return same(got, want.data(), pz * bytes);
    }
  }
  return false;
}

}  // namespace copse::testing
