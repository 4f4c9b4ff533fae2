#include "runtime/call_buffers.hpp"

#include <stdexcept>

namespace copse {

CallBuffers::CallBuffers(const CallArgs& args, int ranks, int rank) : a_(args), ranks_(ranks), rank_(rank) {
  const Collective c = a_.collective;
  eb_ = a_.op ? a_.op->element_bytes : c == Collective::barrier ? 0 : dtype_size(a_.dtype);
  if (!a_.op) data_ = data_op(a_.dtype, eb_);
  count_ = c == Collective::barrier ? 1 : a_.blocks ? a_.blocks->block : a_.count;
  if (c == Collective::alltoall) a_.root = 0;  // none: MovedBlocks and the plan's key read 0
}

std::size_t CallBuffers::work_bytes(std::uint64_t n, std::span<const int> slot_of) const {
  const auto p = static_cast<std::uint64_t>(ranks_);
  switch (a_.collective) {
    case Collective::reduce: return rank_ == a_.root ? 0 : n * eb_;
    case Collective::allgather: return into_recv(n, slot_of) ? 0 : p * n * eb_;
    case Collective::reduce_scatter: return p * n * eb_;
    default: return MovedBlocks::moves(a_.collective) ? moved().vector(n) * eb_ : 0;
  }
}

CallPiece CallBuffers::load(std::uint64_t at, std::uint64_t n, std::byte* work, std::span<const int> slot_of) const {
  CallPiece piece{at, n};
  const std::size_t eb = eb_;
  const std::byte* send = bytes_of(a_.send);
  std::byte* recv = bytes_of(a_.recv);
  const auto me = static_cast<std::uint64_t>(rank_);
  switch (a_.collective) {
    case Collective::allreduce:
      // The user's receive buffer is the working vector, the input read from
      // send where it is not yet written (none in place).
      piece.y = recv + at * eb;
      piece.input = input_of(send + at * eb, piece.y, n);
      break;
    case Collective::reduce: {
      // The root works in its receive buffer, the others in private memory
      // (whose result nobody reads).
      const bool root = rank_ == a_.root;
      piece.y = root ? recv + at * eb : work;
      piece.input = input_of(send + at * eb, piece.y, n, root);
      break;
    }
    case Collective::allgather: {
      // In place: the contribution is already at its block of recv.
      const std::byte* mine = send == recv ? recv + me * count_ * eb : send;
      piece.into_recv = into_recv(n, slot_of);
      piece.y = piece.into_recv ? recv : work;
      copy_bytes(piece.y + block_at(rank_, n, slot_of), mine + at * eb, n * eb);
      break;
    }
    case Collective::reduce_scatter:
      // In place the whole input is in recv (== send); the result goes to its
      // front after the run, once nothing reads the input any more.
      piece.y = work;
      if (reads_in_place(n, slot_of)) {
        piece.input = input_of(send, work, static_cast<std::uint64_t>(ranks_) * n);
      } else {
        if (!a_.blocks) throw std::logic_error("reduce_scatter in pieces or over another numbering needs its blocks");
        a_.blocks->pack(send, work, at, n, eb, [&](int v) { return block_at(v, n, slot_of); });
      }
      break;
    case Collective::barrier: piece.y = work; break;
    case Collective::bcast: piece.y = recv + at * eb; break;  // the buffer
    default:
      piece.y = work;
      moved().load(a_.send, a_.recv, work, at, n);
      break;
  }
  return piece;
}

void CallBuffers::store(const CallPiece& piece, std::span<const int> slot_of) const {
  const std::size_t eb = eb_;
  const std::uint64_t at = piece.at, n = piece.n;
  std::byte* recv = bytes_of(a_.recv);
  switch (a_.collective) {
    case Collective::allgather:
      if (!piece.into_recv)
        for (int v = 0; v < ranks_; ++v)
          copy_bytes(recv + (static_cast<std::uint64_t>(v) * count_ + at) * eb, piece.y + block_at(v, n, slot_of),
                     n * eb);
      return;
    case Collective::reduce_scatter: {
      const std::uint64_t mine = a_.blocks ? a_.blocks->real(static_cast<std::size_t>(rank_), at, n) : n;
      // In place, this overwrites input only where this piece has read it.
      copy_bytes(recv + at * eb, piece.y + block_at(rank_, n, slot_of), mine * eb);
      return;
    }
    default:
      if (MovedBlocks::moves(a_.collective)) moved().store(piece.y, a_.send, a_.recv, at, n);
      return;
  }
}

}  // namespace copse
