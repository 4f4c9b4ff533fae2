#include "transport/mpi_link.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

namespace copse::mpi {

namespace {

// Serialises copse's MPI calls below MPI_THREAD_MULTIPLE: one lock for the
// whole process, since two Teams' threads must not call MPI at once either.
std::mutex g_mpi_mutex;

constexpr int kNoticeTag = static_cast<int>(MpiChannel::tag_of(TagSpace::notice, 1, 0, 0));

// Whether, with `max_threads` thread ranks per process, every tag of every
// space differs from every tag of every other space (and none is negative).
constexpr bool tag_spaces_disjoint(int max_threads) {
  const TagSpace spaces[] = {TagSpace::notice, TagSpace::link, TagSpace::arrival};
  for (TagSpace a : spaces)
    for (TagSpace b : spaces) {
      if (a == b) continue;
      for (int f = 0; f < max_threads; ++f)
        for (int t = 0; t < max_threads; ++t) {
          const long long tag = MpiChannel::tag_of(a, max_threads, f, t);
          if (tag < 0) return false;
          for (int g = 0; g < max_threads; ++g)
            for (int u = 0; u < max_threads; ++u)
              if (tag == MpiChannel::tag_of(b, max_threads, g, u)) return false;
        }
    }
  return true;
}
static_assert(tag_spaces_disjoint(1) && tag_spaces_disjoint(2) && tag_spaces_disjoint(3) && tag_spaces_disjoint(5) &&
                  tag_spaces_disjoint(8),
              "the tags of a channel's message kinds must never coincide");
constexpr std::size_t kNoticeBytes = 1024;  // kind byte, then the message (truncated), then '\0'

// How long withdraw waits for a request that cannot be cancelled (a send
// MPI has started) before it lets MPI finish it alone.
constexpr auto kWithdrawPatience = std::chrono::milliseconds(100);

bool mpi_usable() {
  int finalized = 0;
  PMPI_Finalized(&finalized);
  return !finalized;
}

int error_class(int rc) {
  int cls = rc;
  PMPI_Error_class(rc, &cls);
  return cls;
}

}  // namespace

void check_mpi(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  PMPI_Error_string(rc, text, &length);
  throw SystemError(what + " failed: " + std::string(text, static_cast<std::size_t>(std::max(length, 0))));
}

// ---- MpiChannel -------------------------------------------------------------------

void MpiChannel::require_tags(TagSpace space, int max_threads, long long tag_ub) {
  const long long needed = last_tag(space, max_threads);
  if (needed <= tag_ub) return;
  throw UsageError(std::string(space == TagSpace::arrival ? "arrival estimates" : "copse's transfers") + " with " +
                   std::to_string(max_threads) + " thread ranks per process need tag " + std::to_string(needed) +
                   ", above this MPI's MPI_TAG_UB " + std::to_string(tag_ub));
}

MpiChannel::MpiChannel(MPI_Comm comm, int max_threads) : comm_(comm), max_threads_(std::max(max_threads, 1)) {
  check_mpi(PMPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  check_mpi(PMPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  int provided = MPI_THREAD_SINGLE;
  check_mpi(PMPI_Query_thread(&provided), "MPI_Query_thread");
  multiple_ = provided >= MPI_THREAD_MULTIPLE;
  void* value = nullptr;
  int found = 0;
  check_mpi(PMPI_Comm_get_attr(comm_, MPI_TAG_UB, &value, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
  tag_ub_ = found ? *static_cast<int*>(value) : 32767;
  require_tags(TagSpace::link, max_threads_, tag_ub_);
  notice_buffer_.assign(kNoticeBytes, '\0');
  check_mpi(PMPI_Irecv(notice_buffer_.data(), static_cast<int>(kNoticeBytes), MPI_CHAR, MPI_ANY_SOURCE, kNoticeTag,
                       comm_, &notice_),
            "MPI_Irecv (failure notices)");
}

MpiChannel::~MpiChannel() {
  if (!mpi_usable()) return;
  auto held = lock();
  if (notice_ != MPI_REQUEST_NULL) {
    // An unmatched receive cancels at once; a matched notice is already here.
    PMPI_Cancel(&notice_);
    PMPI_Wait(&notice_, MPI_STATUS_IGNORE);
  }
  for (MPI_Request& r : sent_requests_)
    if (r != MPI_REQUEST_NULL) PMPI_Request_free(&r);  // small, eager: MPI completes them alone
}

std::unique_lock<std::mutex> MpiChannel::lock() const {
  return multiple_ ? std::unique_lock<std::mutex>() : std::unique_lock<std::mutex>(g_mpi_mutex);
}

void MpiChannel::notify(ErrorKind kind, const std::string& message, const std::function<bool(int)>& skip) noexcept {
  try {
    auto held = lock();
    if (!sent_requests_.empty() || !mpi_usable()) return;  // once per process is enough
    std::vector<char> text(kNoticeBytes, '\0');
    text[0] = static_cast<char>(kind);
    std::memcpy(text.data() + 1, message.data(), std::min(message.size(), kNoticeBytes - 2));
    sent_notices_.push_back(std::move(text));
    for (int q = 0; q < size_; ++q) {
      if (q == rank_ || (skip && skip(q))) continue;
      MPI_Request r = MPI_REQUEST_NULL;
      if (PMPI_Isend(sent_notices_.back().data(), static_cast<int>(kNoticeBytes), MPI_CHAR, q, kNoticeTag, comm_, &r) ==
          MPI_SUCCESS) {
        sent_requests_.push_back(r);
        sent_to_.push_back(q);
      }
    }
    if (sent_requests_.empty()) {  // a process of one: mark it sent
      sent_requests_.push_back(MPI_REQUEST_NULL);
      sent_to_.push_back(rank_);
    }
  } catch (...) {
    // Best effort: the failure itself is what gets reported.
  }
}

void MpiChannel::push_notices(std::chrono::milliseconds patience, const std::function<bool(int)>& needless) noexcept {
  const auto until = std::chrono::steady_clock::now() + patience;
  try {
    for (;;) {
      bool open = false;
      {
        auto held = lock();
        if (!mpi_usable()) return;
        for (std::size_t i = 0; i < sent_requests_.size(); ++i) {
          int flag = 0;
          if (sent_requests_[i] != MPI_REQUEST_NULL &&
              PMPI_Test(&sent_requests_[i], &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && !flag && !needless(sent_to_[i]))
            open = true;
        }
      }
      if (!open || std::chrono::steady_clock::now() >= until) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  } catch (...) {
    // Best effort, as notify.
  }
}

void MpiChannel::poll_notice() {
  if (!noticed_) {
    if (notice_ == MPI_REQUEST_NULL) return;
    int flag = 0;
    MPI_Status status;
    if (PMPI_Test(&notice_, &flag, &status) != MPI_SUCCESS || !flag) return;
    noticed_ = true;
    notice_kind_ = static_cast<ErrorKind>(notice_buffer_[0]);
    notice_buffer_.back() = '\0';
    notice_text_ = notice_buffer_.data() + 1;
  }
  throw PeerFailure(notice_kind_, notice_text_);
}

bool MpiChannel::failed() {
  auto held = lock();
  try {
    poll_notice();
  } catch (const PeerFailure&) {
  }
  return noticed_ || !sent_requests_.empty();
}

// ---- MpiLink ----------------------------------------------------------------------

MpiLink::MpiLink(MpiChannel& channel, const RankMap& layout, int rank)
    : channel_(channel), layout_(layout), rank_(rank) {}

MpiLink::~MpiLink() {
  if (send_ == MPI_REQUEST_NULL && recv_ == MPI_REQUEST_NULL) return;
  LinkRank c;
  withdraw(c);
}

int MpiLink::bytes_of(const LinkRank& c, const Transfer& t) const {
  const std::uint64_t bytes = t.count * c.eb;
  if (bytes > static_cast<std::uint64_t>(INT_MAX))
    throw UsageError("a message of " + std::to_string(bytes) + " bytes is beyond an MPI int count");
  return static_cast<int>(bytes);
}

void MpiLink::poll_notice_now_and_then() {
  // A notice only matters to a rank stuck waiting: looking every 64 polls
  // keeps the test of the notice off the path of a short wait.
  if ((++polls_ & 63U) == 0) channel_.poll_notice();
}

void MpiLink::start_send(LinkRank& c, const Transfer& send, const std::byte* data) {
  c.begin_send(send);
  const int bytes = bytes_of(c, send);
  auto held = channel_.lock();
  // The message is built only on failure: a run's transfers allocate nothing.
  const int rc = PMPI_Isend(data, bytes, MPI_BYTE, layout_.mpi_rank(send.peer),
                            channel_.tag(TagSpace::link, layout_.thread(rank_), layout_.thread(send.peer)),
                            channel_.comm(), &send_);
  if (rc != MPI_SUCCESS)
    check_mpi(rc, "copse: rank " + std::to_string(rank_) + ": MPI_Isend to rank " + std::to_string(send.peer));
}

bool MpiLink::test_send(LinkRank& c) {
  if (c.send_done) return true;
  auto held = channel_.lock();
  int flag = 0;
  if (const int rc = PMPI_Test(&send_, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
    check_mpi(rc, "copse: rank " + std::to_string(rank_) + ": MPI_Test (send to rank " +
                      std::to_string(c.sending.peer) + ")");
  if (!flag) {
    poll_notice_now_and_then();
    return false;
  }
  c.send_done = true;
  return true;
}

void MpiLink::start_recv(LinkRank& c, const Transfer& recv, std::byte* target, Combine side) {
  const int bytes = bytes_of(c, recv);
  // The executor stages combining receives (combines_in_place() is false):
  // one that reaches the link would overwrite what it combines with.
  if (side != Combine::replace && bytes > 0)
    throw ScheduleError("copse: rank " + std::to_string(rank_) + " asks the MPI link to combine " +
                        std::to_string(recv.count) + " elements from rank " + std::to_string(recv.peer) +
                        " in place, which it cannot: the executor stages such receives");
  c.begin_recv(recv, target, side);
  auto held = channel_.lock();
  const int rc = PMPI_Irecv(target, bytes, MPI_BYTE, layout_.mpi_rank(recv.peer),
                            channel_.tag(TagSpace::link, layout_.thread(recv.peer), layout_.thread(rank_)),
                            channel_.comm(), &recv_);
  if (rc != MPI_SUCCESS)
    check_mpi(rc, "copse: rank " + std::to_string(rank_) + ": MPI_Irecv from rank " + std::to_string(recv.peer));
}

bool MpiLink::test_recv(LinkRank& c) {
  if (c.recv_done) return true;
  const Transfer& recv = c.receiving;
  const int expected = bytes_of(c, recv);
  int flag = 0, got = 0;
  MPI_Status status;
  {
    auto held = channel_.lock();
    const int rc = PMPI_Test(&recv_, &flag, &status);
    if (!flag && rc == MPI_SUCCESS) {
      poll_notice_now_and_then();
      return false;
    }
    // A single-completion test reports the request's error in its return
    // value (status.MPI_ERROR is not set).
    if (rc != MPI_SUCCESS && error_class(rc) == MPI_ERR_TRUNCATE)
      got = -1;
    else if (rc != MPI_SUCCESS)
      check_mpi(rc, "copse: rank " + std::to_string(rank_) + ": MPI_Test (receive from rank " +
                        std::to_string(recv.peer) + ")");
    else
      check_mpi(PMPI_Get_count(&status, MPI_BYTE, &got), "MPI_Get_count");
  }
  if (got != expected) {
    const auto elements = [&](long long bytes) {
      std::string text;
      if (c.eb > 0 && bytes % static_cast<long long>(c.eb) == 0)
        text = std::to_string(bytes / static_cast<long long>(c.eb)) + " elements (";
      else
        text = "(";
      return text + std::to_string(bytes) + " bytes)";
    };
    const std::string received = std::to_string(recv.count) + " elements (" + std::to_string(expected) + " bytes)";
    const std::string where =
        " (into element " + std::to_string(recv.offset) + ") in its step " + std::to_string(c.step);
    if (got < 0)
      throw ScheduleError("size mismatch: rank " + std::to_string(recv.peer) + " sends more than the " + received +
                          " that rank " + std::to_string(rank_) + " receives" + where + " (MPI truncated the message)");
    throw ScheduleError("size mismatch: rank " + std::to_string(recv.peer) + " sends " + elements(got) + " to rank " +
                        std::to_string(rank_) + ", which receives " + received + where);
  }
  c.recv_done = true;
  return true;
}

// Receives that have not matched cancel at once. A send MPI has started
// (rendezvous with a live peer) cannot be cancelled in Open MPI: give it a
// moment to finish, then let MPI complete it on its own.
void MpiLink::withdraw(LinkRank& c) noexcept {
  c.send_done = c.recv_done = true;
  c.waiting = LinkRank::Wait::none;
  if (!mpi_usable()) return;
  for (MPI_Request* r : {&recv_, &send_}) {
    if (*r == MPI_REQUEST_NULL) continue;
    {
      auto held = channel_.lock();
      PMPI_Cancel(r);
    }
    const auto until = std::chrono::steady_clock::now() + kWithdrawPatience;
    for (;;) {
      int flag = 0;
      {
        auto held = channel_.lock();
        if (PMPI_Test(r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) flag = 1;
        if (!flag && std::chrono::steady_clock::now() >= until) {
          PMPI_Request_free(r);
          flag = 1;
        }
      }
      if (flag) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    *r = MPI_REQUEST_NULL;
  }
}

std::string MpiLink::peer_state(const LinkRank&, int peer) const {
  return "; rank " + std::to_string(peer) + " is on node " + std::to_string(layout_.node(peer)) + " (MPI rank " +
         std::to_string(layout_.mpi_rank(peer)) + ")";
}

// ---- ArrivalChannel ---------------------------------------------------------------

ArrivalChannel::ArrivalChannel(MpiChannel& channel, const RankMap& layout, int rank)
    : channel_(channel), layout_(layout), rank_(rank) {
  MpiChannel::require_tags(TagSpace::arrival, channel.max_threads(), channel.tag_ub());
  const auto p = static_cast<std::size_t>(layout.ranks());
  sends_.assign(p, MPI_REQUEST_NULL);
  recvs_.assign(p, MPI_REQUEST_NULL);
  in_.assign(p, 0);
  done_.assign(p, 0);
}

ArrivalChannel::~ArrivalChannel() {
  if (!mpi_usable()) return;
  {
    auto held = channel_.lock();
    for (auto& r : sends_)
      if (r != MPI_REQUEST_NULL) PMPI_Request_free(&r);  // eager 8-byte sends: complete on their own
  }
  cancel_receives();
}

void ArrivalChannel::publish(std::int64_t value) {
  const int p = layout_.ranks();
  const int me = layout_.thread(rank_);
  auto held = channel_.lock();
  check_mpi(PMPI_Waitall(p, sends_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall (arrival values)");
  out_ = value;
  for (int r = 0; r < p; ++r)
    if (r != rank_)
      check_mpi(
          PMPI_Isend(&out_, 1, MPI_INT64_T, layout_.mpi_rank(r), channel_.tag(TagSpace::arrival, me, layout_.thread(r)),
                     channel_.comm(), &sends_[static_cast<std::size_t>(r)]),
          "MPI_Isend (arrival value)");
}

void ArrivalChannel::post_receives() {
  const int p = layout_.ranks();
  const int me = layout_.thread(rank_);
  auto held = channel_.lock();
  for (int r = 0; r < p; ++r)
    if (r != rank_)
      check_mpi(PMPI_Irecv(&in_[static_cast<std::size_t>(r)], 1, MPI_INT64_T, layout_.mpi_rank(r),
                           channel_.tag(TagSpace::arrival, layout_.thread(r), me), channel_.comm(),
                           &recvs_[static_cast<std::size_t>(r)]),
                "MPI_Irecv (arrival value)");
}

bool ArrivalChannel::poll() {
  int received = 0;
  auto held = channel_.lock();
  channel_.poll_notice();
  check_mpi(PMPI_Testsome(layout_.ranks(), recvs_.data(), &received, done_.data(), MPI_STATUSES_IGNORE),
            "MPI_Testsome (arrival values)");
  return received == MPI_UNDEFINED;  // no request left: every value is in
}

std::vector<int> ArrivalChannel::missing() const {
  std::vector<int> out;  // MPI_Testsome nulls the completed requests
  for (int r = 0; r < layout_.ranks(); ++r)
    if (recvs_[static_cast<std::size_t>(r)] != MPI_REQUEST_NULL) out.push_back(r);
  return out;
}

void ArrivalChannel::cancel_receives() noexcept {
  if (!mpi_usable()) return;
  std::unique_lock<std::mutex> held;
  try {
    held = channel_.lock();
  } catch (...) {
    return;  // a mutex that cannot be taken: leave the receives to MPI_Finalize
  }
  for (auto& r : recvs_)
    if (r != MPI_REQUEST_NULL) {
      PMPI_Cancel(&r);
      PMPI_Request_free(&r);
    }
}

}  // namespace copse::mpi
