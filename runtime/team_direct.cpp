#include "runtime/team_direct.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace copse {

TeamDirectReduce::TeamDirectReduce(LinkEngine& engine, DirectReduce& reducer, LinkRank& link,
                                   std::optional<std::chrono::milliseconds> timeout,
                                   std::chrono::milliseconds report_every, WaitReporter report)
    : engine_(engine), reducer_(reducer), link_(link), timeout_(timeout) {
  direct_.rank = link.rank;
  auto describe = [this](const std::string& how) {
    return engine_.settings().layout.describe(link_.rank) + ", direct reduce of call " + std::to_string(link_.round) +
           " (" + std::string(link_.activity) + "): " + how + " waiting for rank " +
           std::to_string(direct_.waiting_for) + " " + direct_.waiting_what +
           engine_.peer_state(link_, direct_.waiting_for);
  };
  policy_.timeout_message = [describe, ms = timeout.value_or(std::chrono::milliseconds(0)).count()] {
    return describe("timed out after " + std::to_string(ms) + " ms");
  };
  if (report_every.count() > 0) {
    policy_.report_every = report_every;
    policy_.report = [this, describe, report = std::move(report)] {
      const auto waited =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - direct_.wait_started);
      report(describe("still blocked after " + std::to_string(waited.count()) + " s"));
    };
  }
  policy_.check = [this, describe] {
    if (engine_.aborted()) throw LinkAborted{};
    if (!engine_.settings().peer_gone || direct_.waiting_for < 0) return;
    const std::string why = engine_.settings().peer_gone(direct_.waiting_for);
    if (!why.empty())
      throw SystemError(describe("gave up") + ": rank " + std::to_string(direct_.waiting_for) + ": " + why);
  };
}

template <class Body>
decltype(auto) TeamDirectReduce::failing(Body&& body) {
  try {
    return body();
  } catch (...) {
    // Timed out, a size mismatch or the operator threw here (every other
    // rank then learns it from the engine), or aborted by another rank.
    if (!engine_.aborted()) engine_.fail(std::current_exception());
    throw;
  }
}

void TeamDirectReduce::begin(Collective c) {
  link_.activity = to_string(c);
  link_.step = 0;
  engine_.publish_start(link_);  // for peers' wait messages (LinkEngine::peer_state)
}

void TeamDirectReduce::arm_deadline() {
  if (timeout_) policy_.deadline = std::chrono::steady_clock::now() + *timeout_;
}

template <class Body>
void TeamDirectReduce::guarded(Collective c, Body&& body) {
  begin(c);
  arm_deadline();
  failing(body);
  engine_.publish_done(link_);
}

std::optional<std::uint32_t> TeamDirectReduce::start(const SlotCall& c, bool wait) {
  if (!wait && !reducer_.ready_to_post(direct_)) {
    if (engine_.aborted()) throw LinkAborted{};
    return std::nullopt;  // a one-sided call before is not settled yet
  }
  begin(c.collective);
  arm_deadline();
  return failing([&] { return start_slot_call(reducer_, direct_, c, policy_); });
}

bool TeamDirectReduce::finish(std::uint32_t call, const SlotCall& c, bool wait) {
  if (!wait && !slot_call_ready(reducer_, direct_, call, c)) {
    if (engine_.aborted()) throw LinkAborted{};
    return false;
  }
  arm_deadline();
  if (const std::size_t read = failing([&] { return finish_slot_call(reducer_, direct_, call, c, policy_); }))
    engine_.count_attached(read);
  engine_.publish_done(link_);
  return true;
}

void TeamDirectReduce::run(Collective c, const void* send, void* recv, std::size_t count, const ReduceOp* op,
                           bool sliced) {
  guarded(c, [&] {
    const auto* in = static_cast<const std::byte*>(send);
    auto* out = static_cast<std::byte*>(recv);
    if (sliced)
      reducer_.allreduce_sliced(direct_, in, out, count, *op, policy_);
    else
      reducer_.allreduce(direct_, in, out, count, op, policy_);
  });
}

void TeamDirectReduce::bcast(void* buffer, std::size_t bytes, int root) {
  // Processes that may read each other's memory, where the set-up found the
  // read faster than the ring (LinkConfig::fast_attach; the same on every rank).
  const LinkConfig& link = engine_.config();
  const bool attach = link.cross_memory_attach && link.fast_attach;
  guarded(Collective::bcast, [&] {
    if (const std::size_t read = reducer_.bcast(direct_, static_cast<std::byte*>(buffer), bytes, root, policy_, attach))
      engine_.count_attached(read);
  });
}

void TeamDirectReduce::allgather(const void* mine, void* recv, std::size_t count, std::size_t element_bytes,
                                 bool by_address) {
  guarded(Collective::allgather, [&] {
    const auto* in = static_cast<const std::byte*>(mine);
    auto* out = static_cast<std::byte*>(recv);
    if (!by_address)
      direct_allgather(reducer_, direct_, in, out, count, element_bytes, policy_);
    else if (const std::size_t read =
                 direct_allgather_by_address(reducer_, direct_, in, out, count, element_bytes, policy_))
      engine_.count_attached(read);
  });
}

void TeamDirectReduce::reduce_scatter(const void* send, void* recv, std::size_t total, std::size_t from,
                                      std::size_t count, const ReduceOp& op, bool by_address) {
  guarded(Collective::reduce_scatter, [&] {
    const auto* in = static_cast<const std::byte*>(send);
    auto* out = static_cast<std::byte*>(recv);
    if (!by_address) {
      direct_reduce_scatter(reducer_, direct_, in, out, total, from, count, op, policy_);
      return;
    }
    // In place the result goes to recv's first elements, which are the
    // input's and some peer's block to read: it builds after the chunks and
    // reaches recv once every peer has read (the call's end).
    const std::size_t result = in == out ? count * op.element_bytes : 0;
    const std::span<std::byte> chunks = fold_chunks(op.element_bytes, result);
    std::byte* into = in == out ? chunks.data() + chunks.size() : out;
    if (const std::size_t read =
            direct_reduce_scatter_by_address(reducer_, direct_, in, into, total, from, count, op, chunks, policy_))
      engine_.count_attached(read);
    if (into != out && result > 0) std::memcpy(out, into, result);
  });
}

void TeamDirectReduce::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root,
                              bool by_address) {
  guarded(Collective::reduce, [&] {
    const auto* in = static_cast<const std::byte*>(send);
    auto* out = static_cast<std::byte*>(recv);
    if (!by_address) {
      direct_reduce(reducer_, direct_, in, out, count, root, op, policy_);
      return;
    }
    // Only the root folds.
    const std::span<std::byte> chunks = direct_.rank == root ? fold_chunks(op.element_bytes) : std::span<std::byte>{};
    if (const std::size_t read = direct_reduce_by_address(reducer_, direct_, in, out, count, root, op, chunks, policy_))
      engine_.count_attached(read);
  });
}

std::span<std::byte> TeamDirectReduce::fold_chunks(std::size_t element_bytes, std::size_t after) {
  const std::size_t chunks = 2 * std::max(kChunkBytes, element_bytes);
  if (bounce_.size() < chunks + after) bounce_.resize(chunks + after);
  return std::span(bounce_).first(chunks);
}

const std::byte* TeamDirectReduce::blocks_to_share(const std::byte* recv, std::size_t bytes) {
  if (bounce_.size() < bytes) bounce_.resize(bytes);
  if (bytes > 0) std::memcpy(bounce_.data(), recv, bytes);
  return bounce_.data();
}

void TeamDirectReduce::move(Collective c, const void* send, void* recv, std::size_t count, std::size_t element_bytes,
                            int root, bool by_address) {
  guarded(c, [&] {
    const auto* in = static_cast<const std::byte*>(send);
    auto* out = static_cast<std::byte*>(recv);
    std::size_t read = 0;
    if (!by_address) {
      if (c == Collective::gather)
        direct_gather(reducer_, direct_, in, out, count, element_bytes, root, policy_);
      else if (c == Collective::scatter)
        direct_scatter(reducer_, direct_, in, out, count, element_bytes, root, policy_);
      else
        direct_alltoall(reducer_, direct_, in, out, count, element_bytes, policy_);
    } else if (c == Collective::gather) {
      read = direct_gather_by_address(reducer_, direct_, in, out, count, element_bytes, root, policy_);
    } else if (c == Collective::scatter) {
      read = direct_scatter_by_address(reducer_, direct_, in, out, count, element_bytes, root, policy_);
    } else {
      if (in == out) in = blocks_to_share(out, static_cast<std::size_t>(reducer_.ranks()) * count * element_bytes);
      read = direct_alltoall_by_address(reducer_, direct_, in, out, count, element_bytes, policy_);
    }
    if (read) engine_.count_attached(read);
  });
}

void TeamDirectReduce::vector(Collective c, int root, const void* input, VectorLayout sent, void* recv,
                              VectorLayout received) {
  guarded(c, [&] {
    const auto* in = static_cast<const std::byte*>(input);
    auto* out = static_cast<std::byte*>(recv);
    if (c == Collective::alltoall && in == out) {
      std::uint64_t extent = 0;  // the end of the last block sent
      for (std::size_t q = 0; q < sent.counts.size(); ++q)
        extent = std::max(extent, sent.counts[q] > 0 ? sent.displs[q] + sent.counts[q] : 0);
      in = blocks_to_share(out, extent);
    }
    if (const std::size_t read = direct_vector_by_address(reducer_, direct_, c, root, in, sent, out, received, policy_))
      engine_.count_attached(read);
  });
}

}  // namespace copse
