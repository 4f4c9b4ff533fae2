#include "runtime/rank_core.hpp"

#include <exception>
#include <string>
#include <utility>

#include "algorithms/registry.hpp"
#include "common/error.hpp"
#include "runtime/communicator.hpp"
#include "runtime/team_wait.hpp"

namespace copse {

// ---- Comm: the API, once ----

Comm::Comm(std::unique_ptr<RankCore> core) : core_(std::move(core)) {}
Comm::Comm(Comm&&) noexcept = default;
Comm& Comm::operator=(Comm&&) noexcept = default;
Comm::~Comm() = default;

int Comm::rank() const { return core_->rank; }
int Comm::size() const { return core_->core_team.ranks; }
Picos Comm::virtual_time() const { return core_->last_time; }
std::size_t Comm::cached_plans() const { return core_->cached_plans(); }
void Comm::set_form(std::optional<Form> form) { core_->call_choice.form = form; }
void Comm::set_blocks(int blocks) {
  if (blocks < 0) throw UsageError("set_blocks: the block count must not be negative, got " + std::to_string(blocks));
  core_->call_choice.blocks = blocks;
}
void Comm::edge(double fraction) { core_->edge(fraction); }
const std::vector<Picos>& Comm::planned_arrival() const { return core_->planned; }

void Comm::allreduce(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  ready().allreduce(send, recv, count, op);
}
void Comm::reduce(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  ready().reduce(send, recv, count, op, root);
}
void Comm::bcast(void* buffer, std::size_t count, DType dtype, int root) { ready().bcast(buffer, count, dtype, root); }
void Comm::barrier() { ready().barrier(); }
void Comm::allgather(const void* send, void* recv, std::size_t count, DType dtype) {
  ready().allgather(send, recv, count, dtype);
}
void Comm::reduce_scatter_block(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  ready().reduce_scatter_block(send, recv, count, op);
}
void Comm::reduce_scatter(const void* send, void* recv, const int* counts, const ReduceOp& op) {
  ready().reduce_scatter(send, recv, counts, op);
}
namespace {
// Scatter, gather or alltoall: by address where the node may, else the runtime's schedules.
void move_blocks(RankCore& core, Collective c, const void* send, void* recv, std::size_t count, DType dtype, int root) {
  if (!core.move_direct(c, send, recv, count, dtype_size(dtype), root)) core.move(c, send, recv, count, dtype, root);
}
}  // namespace

void Comm::scatter(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  move_blocks(ready(), Collective::scatter, send, recv, count, dtype, root);
}
void Comm::gather(const void* send, void* recv, std::size_t count, DType dtype, int root) {
  move_blocks(ready(), Collective::gather, send, recv, count, dtype, root);
}
void Comm::alltoall(const void* send, void* recv, std::size_t count, DType dtype) {
  move_blocks(ready(), Collective::alltoall, send, recv, count, dtype, 0);
}

// ---- RankCore ----

RankCore::RankCore(CoreTeam& team, int r)
    : core_team(team), rank(r), monitor(team.settings->arrival, team.arrival_aware) {
  link.rank = r;
  const CommOptionsBase& o = *team.settings;
  if (team.direct) {
    direct.emplace(*team.engine, *team.direct, link, o.wait_timeout, o.wait_report, wait_reporter(o.on_wait_report));
    for (Collective c : all_collectives())
      if (o.leaves_choice(c)) direct_choices_ |= 1u << static_cast<unsigned>(c);
  }
  monitor.returned(now(), false);  // the first phase begins
}

CallKey RankCore::call_key(const PlanOptions& options, const CallChoice& choice, Collective c, std::uint64_t count,
                           std::size_t element_bytes, const ReduceOp* op, int root, bool warmup) {
  CallKey key = options.call_key(c, count, element_bytes, op ? op->commutative : true, root, warmup);
  if (choice.form && has_hierarchy(c)) key.form = *choice.form;
  if (choice.blocks > 0) key.blocks = choice.blocks;
  return key;
}

void RankCore::check_call(const CallKey& key, const ReduceOp* op) const {
  const Collective c = key.collective;
  const int p = core_team.ranks;
  if (takes_root(c) && (key.root < 0 || key.root >= p))
    throw UsageError(std::string(to_string(c)) + ": root " + std::to_string(key.root) + " is not a rank in [0, " +
                     std::to_string(p) + ")");
  const bool reduces = c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter;
  if (reduces && op && key.algorithm != kSelectAlgorithm)
    check_operator(find_algorithm(c, key.algorithm), op->name, op->commutative);
}

void RankCore::run(std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op, Collective c,
                   Link* remote, RunInput input, std::uint64_t attach_from) {
  StepRun r;
  start_run(r, steps, y, scratch, op, c, remote, input, attach_from);
  advance_run(r, remote, true);
}

void RankCore::start_run(StepRun& r, std::span<const Step> steps, std::byte* y, std::byte* scratch, const ReduceOp& op,
                         Collective c, Link* remote, RunInput input, std::uint64_t attach_from) {
  LinkEngine& engine = *core_team.engine;
  if (engine.aborted()) core_team.rethrow_failure();
  link.round = calls++;
  link.activity = to_string(c);
  link.attach_from = attach_from;
  link.clock.reset();
  StepExecutor(engine, remote).start(r, link, steps, y, scratch, op, nullptr, input);
}

bool RankCore::advance_run(StepRun& r, Link* remote, bool wait) {
  try {
    if (!StepExecutor(*core_team.engine, remote).advance(r, link, wait)) return false;
  } catch (...) {
    // Aborted by another rank, or failed here (recorded before the abort):
    // either way every rank reports the team's first failure.
    core_team.rethrow_failure();
  }
  last_time = link.clock.now();
  return true;
}

// Whether collective `c` of `bytes` runs through the team's direct reduce
// (small vectors through its slots, large ones in slices: `sliced`): it
// must exist and take the size, and the configuration must leave the
// choice to the selection (an algorithm named in the options runs as a
// schedule).
bool RankCore::direct_fits(Collective c, std::size_t bytes, bool sliced) const {
  const int p = core_team.ranks;
  return leaves_choice_to_direct(c) && (sliced ? core_team.shares_memory && DirectReduce::slices(p, bytes)
                                        : c == Collective::allreduce ? DirectReduce::fits(p, bytes)
                                                                     : DirectReduce::holds(p, bytes));
}

template <class Body>
void RankCore::run_direct(Collective c, Body&& body) {
  if (core_team.engine->aborted()) core_team.rethrow_failure();
  link.round = calls++;
  try {
    body(*direct);
  } catch (...) {
    core_team.rethrow_failure();
  }
  last_time = 0;
  returned(c);
}

bool RankCore::allreduce_direct(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  if (core_team.arrival_aware) return false;  // planned by arrival, or its warm-up's default
  const std::size_t bytes = count * op.element_bytes;
  for (bool sliced : {false, true})
    if (direct_fits(Collective::allreduce, bytes, sliced)) {
      run_direct(Collective::allreduce,
                 [&](TeamDirectReduce& d) { d.run(Collective::allreduce, send, recv, count, &op, sliced); });
      return true;
    }
  return false;
}

bool RankCore::barrier_direct() {
  if (!direct_fits(Collective::barrier, 0, false)) return false;
  run_direct(Collective::barrier,
             [](TeamDirectReduce& d) { d.run(Collective::barrier, nullptr, nullptr, 0, nullptr); });
  return true;
}

bool RankCore::bcast_direct(void* buffer, std::size_t count, std::size_t element_bytes, int root) {
  if (!leaves_choice_to_direct(Collective::bcast)) return false;
  CallKey key;
  key.collective = Collective::bcast;
  key.root = root;
  check_call(key, nullptr);  // a root that is not a rank
  run_direct(Collective::bcast, [&](TeamDirectReduce& d) { d.bcast(buffer, count * element_bytes, root); });
  return true;
}

// Whether collective `c`'s vector of `bytes` (what a rank would post in the
// slots: an allgather's or a gather's block, a scatter's or an alltoall's
// T, a reduce-scatter's whole vector) is read
// where it lies (transport/direct_gather.hpp's calls by address): too large
// for the slots (from there on: at np 2, 9-15 KiB, allgather 1.6-2.0 us
// against the schedules' 2.4-3.7 and Open MPI's 2.6-2.7, reduce 1.2-1.6
// against 1.4-1.7 and 1.9-2.7), where the ranks may read each other's memory -- threads, or
// processes whose set-up allows cross-memory attach: a scatter's, gather's
// and alltoall's always (one read replaces copies made one after another),
// an allgather's, reduce-scatter's and reduce's only where the set-up (or
// the calls' own times: runtime/read_choice.hpp) found the read faster than
// the copies (LinkConfig::fast_attach): elsewhere the schedules'
// copies, made on both cores at once, win (np 2, a probe's read of 1 MiB
// 127 us against a copy's 67, in a launch whose copies through the segment
// ran fast -- runtime/mpi_team_state.hpp's reads_beat_ring --
// mpi_collectives --sync p2p, three rounds, us by median, by address /
// schedules / Open MPI: allgather 16 KiB 4.2 / 2.2 / 4.4, 1 MiB 125 / 88 /
// 127; reduce 16 KiB 4.2 / 1.8 / 4.2, 512 KiB 68 / 41 / 63) -- and, for a reduce,
// in a small team: its root alone reads and combines every vector. Among
// two threads, up to kPairReduceByAddressUpToBytes: beyond it the
// schedule's two threads, copying and combining at once, overtake the root
// alone (thread Comm, back-to-back float sums, root 0, against the
// schedules: 512 KiB 25.7 against 34-38 us, 768 KiB level, 2 MiB 219-226
// against 187-191; three and four threads still ahead at 2 and 4 MiB).
// Where the slots stop and the reads by address begin: when the slots are
// full, but a gather's from half of them -- its root alone reads, so the
// slots' two copies (in, then out) cost more than one read sooner: at np 2
// (mpi_collectives --sync p2p, three rounds, us by median) 8 KiB took 2.1
// through the slots against Open MPI's 1.8, 12 KiB 1.5 by address.
std::size_t RankCore::by_address_above(Collective c) {
  return c == Collective::gather ? DirectReduce::kPostBytes / 2 : DirectReduce::kPostBytes;
}

bool RankCore::reads_by_address(Collective c, std::size_t bytes) const {
  const int p = core_team.ranks;
  if (!leaves_choice_to_direct(c) || !DirectReduce::serves(p) || bytes <= by_address_above(c)) return false;
  if (c == Collective::reduce && p > kReduceByAddressRanks) return false;
  if (core_team.shares_memory) return c != Collective::reduce || p > 2 || bytes <= kPairReduceByAddressUpToBytes;
  const LinkConfig& config = core_team.engine->config();
  const bool replaces_serial_copies =
      c != Collective::reduce && c != Collective::allgather && c != Collective::reduce_scatter;
  return config.cross_memory_attach && (config.fast_attach || replaces_serial_copies);
}

bool RankCore::allgather_direct(const void* send, void* recv, std::size_t count, std::size_t element_bytes) {
  const std::size_t bytes = count * element_bytes;
  const bool by_address = reads_by_address(Collective::allgather, bytes);
  if (!by_address && !direct_fits(Collective::allgather, bytes, false)) return false;
  // In place (send == recv): the contribution is already at its block.
  const void* mine = send == recv ? bytes_of(recv) + static_cast<std::size_t>(rank) * bytes : send;
  run_direct(Collective::allgather,
             [&](TeamDirectReduce& d) { d.allgather(mine, recv, count, element_bytes, by_address); });
  return true;
}

bool RankCore::reduce_scatter_direct(const void* send, void* recv, std::size_t total, std::size_t from,
                                     std::size_t count, const ReduceOp& op) {
  // Each rank posts its whole input (or shares it, by address).
  const bool by_address = reads_by_address(Collective::reduce_scatter, total * op.element_bytes);
  if (!by_address && !direct_fits(Collective::reduce_scatter, total * op.element_bytes, false)) return false;
  run_direct(Collective::reduce_scatter,
             [&](TeamDirectReduce& d) { d.reduce_scatter(send, recv, total, from, count, op, by_address); });
  return true;
}

bool RankCore::reduce_scatter_block_direct(const void* send, void* recv, std::size_t count, const ReduceOp& op) {
  const auto p = static_cast<std::size_t>(core_team.ranks);
  return reduce_scatter_direct(send, recv, p * count, static_cast<std::size_t>(rank) * count, count, op);
}

bool RankCore::reduce_scatter_direct(const void* send, void* recv, const BlockCounts& blocks, const ReduceOp& op) {
  const auto me = static_cast<std::size_t>(rank);
  return reduce_scatter_direct(send, recv, blocks.total(), blocks.displs[me], blocks.counts[me], op);
}

bool RankCore::reduce_direct(const void* send, void* recv, std::size_t count, const ReduceOp& op, int root) {
  const bool by_address = reads_by_address(Collective::reduce, count * op.element_bytes);
  if (!by_address && !direct_fits(Collective::reduce, count * op.element_bytes, false)) return false;
  CallKey key;
  key.collective = Collective::reduce;
  key.root = root;
  check_call(key, nullptr);  // a root that is not a rank
  run_direct(Collective::reduce, [&](TeamDirectReduce& d) { d.reduce(send, recv, count, op, root, by_address); });
  return true;
}

bool RankCore::move_direct(Collective c, const void* send, void* recv, std::size_t count, std::size_t element_bytes,
                           int root) {
  const std::size_t bytes = count * element_bytes;
  // What a rank posts: a gather's block, a scatter's and an alltoall's T blocks.
  const std::size_t posts = c == Collective::gather ? bytes : static_cast<std::size_t>(core_team.ranks) * bytes;
  const bool by_address = reads_by_address(c, posts);
  if (!by_address && !direct_fits(c, posts, false)) return false;
  CallKey key;
  key.collective = c;
  key.root = root;
  check_call(key, nullptr);  // a root that is not a rank
  // In place at a gather's root its block is at its place in recv already.
  const void* mine = c == Collective::gather && send == recv && rank == root
                         ? bytes_of(recv) + static_cast<std::size_t>(root) * bytes
                         : send;
  run_direct(c, [&](TeamDirectReduce& d) { d.move(c, mine, recv, count, element_bytes, root, by_address); });
  return true;
}

bool RankCore::vector_direct(const CallArgs& a) {
  const Collective c = a.collective;
  const int p = core_team.ranks;
  if (!leaves_choice_to_direct(c) || !DirectReduce::serves(p)) return false;
  if (!core_team.shares_memory && !core_team.engine->config().cross_memory_attach) return false;
  CallKey key;
  key.collective = c;
  key.root = a.root;
  check_call(key, nullptr);  // a root that is not a rank
  const VectorArgs& v = *a.vector;
  const std::size_t eb = dtype_size(a.dtype), me = static_cast<std::size_t>(rank);
  const bool in_place = a.send == a.recv, at_root = rank == a.root;
  // The blocks in bytes (PaddedCall::Blocks checks the counts, as the padded way does).
  auto in_bytes = [eb](PaddedCall::Blocks b) {
    for (auto& n : b.counts) n *= eb;
    for (auto& n : b.displs) n *= eb;
    return b;
  };
  PaddedCall::Blocks sent, received;
  const std::byte* input = bytes_of(a.send);
  std::byte* recv = bytes_of(a.recv);
  // One block for every receiver: `count` bytes at `at` of the input.
  auto one_block = [&](std::uint64_t count, std::uint64_t at) {
    sent.counts = {count};
    sent.displs = {at};
  };
  switch (c) {
    case Collective::allgather:
      received = in_bytes(PaddedCall::Blocks("allgatherv", v.recv_counts, v.recv_displs, p));
      one_block(received.counts[me], in_place ? received.displs[me] : 0);  // in place: at its place in recv
      if (in_place) input = recv;
      break;
    case Collective::gather:
      if (at_root) received = in_bytes(PaddedCall::Blocks("gatherv", v.recv_counts, v.recv_displs, p));
      if (at_root && in_place) {
        one_block(received.counts[me], received.displs[me]);  // at its place in recv
        input = recv;
      } else {
        one_block(v.count * eb, 0);
      }
      break;
    case Collective::scatter:
      if (at_root) sent = in_bytes(PaddedCall::Blocks("scatterv", v.send_counts, v.send_displs, p));
      received.counts.assign(static_cast<std::size_t>(p), 0);
      received.displs.assign(static_cast<std::size_t>(p), 0);
      received.counts[static_cast<std::size_t>(a.root)] = at_root && in_place ? sent.counts[me] : v.count * eb;
      if (at_root && in_place) recv += sent.displs[me];  // its block stays in send (recv is send)
      break;
    default:  // alltoall; in place, the blocks to send are recv's, by the receive counts
      received = in_bytes(PaddedCall::Blocks("alltoallv", v.recv_counts, v.recv_displs, p));
      sent = in_place ? received : in_bytes(PaddedCall::Blocks("alltoallv", v.send_counts, v.send_displs, p));
      break;
  }
  run_direct(c, [&](TeamDirectReduce& d) {
    d.vector(c, a.root, input, {sent.counts, sent.displs}, recv, {received.counts, received.displs});
  });
  return true;
}

const ArrivalKey* RankCore::arrive(bool& warmup) {
  warmup = false;
  if (!core_team.arrival_aware) return nullptr;
  const std::int64_t call = monitor.call();
  if (auto value = monitor.arrive(now())) publish(call, *value);
  if (!monitor.planned_by_arrival(call)) {
    warmup = true;
    planned.clear();
    return nullptr;
  }
  agree_arrivals(call);
  arrival_key(predicted, core_team.settings->arrival.resolution, agreed_key);
  // The key's predictions are in the plans' numbering; planned_arrival() is
  // in rank order.
  const std::vector<Picos> internal = arrival_of(agreed_key);
  planned.resize(internal.size());
  for (std::size_t r = 0; r < internal.size(); ++r)
    planned[r] = internal[static_cast<std::size_t>(core_team.internal(static_cast<int>(r)))];
  return &agreed_key;
}

void RankCore::edge(double fraction) {
  const std::int64_t call = monitor.call();
  if (auto value = monitor.edge(now(), fraction)) publish(call, *value);
}

// Every rank's predicted arrival for allreduce `call`. Waits as the links
// do: reported every wait_report, failed past wait_timeout, both naming the
// ranks whose value is missing.
void RankCore::agree_arrivals(std::int64_t call) {
  const CommOptionsBase& o = *core_team.settings;
  PolledWait wait(team_wait_policy(o.wait_timeout, o.wait_report, wait_reporter(o.on_wait_report),
                                   [&] { return arrival_wait_text(calls, rank, missing(call)); }));
  LinkEngine& engine = *core_team.engine;
  try {
    collect(call, [&] {
      if (engine.aborted()) core_team.rethrow_failure();
      wait.look();
    });
  } catch (...) {
    // Timed out here (every rank then reports it), or aborted by another rank.
    cancel_collect();
    if (!engine.aborted()) engine.fail(std::current_exception());
    core_team.rethrow_failure();
  }
}

// ---- buffers ----

ReduceOp data_op(DType dtype, std::size_t element_bytes) {
  ReduceOp op;
  op.name = "copy";
  op.dtype = dtype;
  op.element_bytes = element_bytes;
  return op;
}

void MovedBlocks::blocks_across(const std::byte* from, std::uint64_t from_stride, std::byte* to,
                                std::uint64_t to_stride, std::uint64_t n) const {
  for (std::uint64_t v = 0; v < static_cast<std::uint64_t>(ranks); ++v)
    copy_bytes(to + v * to_stride * eb, from + v * from_stride * eb, n * eb);
}

void MovedBlocks::load(const void* send, const void* recv, std::byte* y, std::uint64_t at, std::uint64_t n) const {
  const std::uint64_t me = static_cast<std::uint64_t>(rank);
  switch (collective) {
    case Collective::scatter:
      if (rank == root) blocks_across(bytes_of(send) + at * eb, count, y, n, n);
      return;
    case Collective::gather: {
      const std::byte* mine = rank == root && send == recv ? bytes_of(recv) + me * count * eb : bytes_of(send);
      copy_bytes(y + me * n * eb, mine + at * eb, n * eb);
      return;
    }
    default: blocks_across(bytes_of(send) + at * eb, count, y, n, n); return;  // alltoall: the send area
  }
}

void MovedBlocks::store(const std::byte* y, const void* send, void* recv, std::uint64_t at, std::uint64_t n) const {
  const std::uint64_t me = static_cast<std::uint64_t>(rank);
  switch (collective) {
    case Collective::scatter:
      if (rank != root || send != recv) copy_bytes(bytes_of(recv) + at * eb, y + me * n * eb, n * eb);
      return;
    case Collective::gather:
      if (rank == root) blocks_across(y, n, bytes_of(recv) + at * eb, count, n);
      return;
    default:  // alltoall: the receive area
      blocks_across(y + static_cast<std::uint64_t>(ranks) * n * eb, n, bytes_of(recv) + at * eb, count, n);
      return;
  }
}

BlockCounts BlockCounts::uniform(int ranks, std::uint64_t count) {
  BlockCounts b;
  const auto p = static_cast<std::size_t>(ranks);
  b.counts.assign(p, count);
  b.displs.resize(p);
  for (std::size_t v = 0; v < p; ++v) b.displs[v] = v * count;
  b.block = count;
  return b;
}

BlockCounts BlockCounts::of(const int* counts, int ranks) {
  BlockCounts b;
  std::uint64_t at = 0;
  for (int v = 0; v < ranks; ++v) {
    if (counts[v] < 0) throw UsageError("reduce_scatter: rank " + std::to_string(v) + "'s count is negative");
    const auto n = static_cast<std::uint64_t>(counts[v]);
    b.counts.push_back(n);
    b.displs.push_back(at);
    at += n;
    b.block = std::max(b.block, n);
  }
  for (std::uint64_t n : b.counts) b.equal = b.equal && n == b.block;
  return b;
}

}  // namespace copse
