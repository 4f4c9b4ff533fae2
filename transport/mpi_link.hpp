#pragma once
// The network link: transfers between ranks that share no memory, as MPI
// point-to-point messages (common/link.hpp gives the semantics every link
// shares; the step executor chooses this one for pairs on different nodes).
//
// Every message travels on a private duplicate of the user's communicator
// (an MpiChannel), so it never matches the application's receives, and
// carries a tag naming its (source thread, destination thread) pair: with
// several thread ranks per process, MPI's per-(process, tag) order is then
// exactly the per-(source rank, destination rank) program order the
// schedules rely on. The channel hands out every tag, from disjoint ranges
// per kind of message (MpiChannel::tag_of): failure notices (below), link
// transfers, and the arrival values of the arrival-aware allreduce
// (ArrivalChannel), so that no kind ever matches another's receive.
//
// One MpiLink per thread rank, at most one send and one receive in flight. A
// receive lands straight in its target. The link does not combine
// (combines_in_place() is false: a message must land somewhere before it can
// be combined): the executor stages combining receives in the rank's scratch
// and combines them itself. A message of the wrong size is a ScheduleError naming both
// ranks and both sizes (MPI_Get_count for a short one; for a long one MPI
// truncates and says only that it was longer). MPI requests progress only
// while polled, so the link cannot block (can_block() is false): the
// executor polls it.
//
// Every MPI call goes through PMPI_ (the interposition library defines the
// MPI_ collectives, and copse's own calls must not come back into it), under
// one process-wide mutex unless the library provides MPI_THREAD_MULTIPLE.
// MPI errors (the duplicate has MPI_ERRORS_RETURN) become SystemError.
//
// Failure notices: a rank that fails tells every other process (notify); a
// rank polling the network finds the notice (MpiLink's tests look every few
// polls) and fails with a PeerFailure carrying the original kind and text,
// so that ranks on other nodes do not wait forever for a rank that gave up.

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "common/error.hpp"
#include "common/link.hpp"
#include "common/rank_map.hpp"

namespace copse::mpi {

// Another process's failure, as its notice told it: the original error's
// kind and message. Told apart from local errors so that it is not passed on
// again.
struct PeerFailure : Error {
  PeerFailure(ErrorKind kind, const std::string& message) : Error(kind, message) {}
};

// Throws SystemError naming `what` and MPI's text for `rc`.
[[noreturn]] void throw_mpi_error(int rc, const std::string& what);
// Throws that unless rc is MPI_SUCCESS.
inline void check_mpi(int rc, std::string_view what) {
  if (rc != MPI_SUCCESS) [[unlikely]]
    throw_mpi_error(rc, std::string(what));
}
// The same, with a message built only on failure: for the calls of every
// transfer (a send, a receive, each test while it waits), where composing
// "rank 3: MPI_Isend to rank 5" each time cost more than the Isend's own
// bookkeeping (callgrind, an 8-byte allreduce between two nodes).
template <class Describe>
requires std::is_invocable_r_v<std::string, Describe&>
inline void check_mpi(int rc, Describe&& describe) {
  if (rc != MPI_SUCCESS) [[unlikely]]
    throw_mpi_error(rc, describe());
}

// The kinds of message on a channel, each with tags of its own.
enum class TagSpace { notice, link, arrival };

// What the thread ranks of one process share: the private communicator, the
// thread level, the tags and the failure notices.
class MpiChannel {
 public:
  // The tag of a message of `space` from thread `from` to thread `to`, among
  // processes of at most `max_threads` thread ranks: notices take tag 0, each
  // other space a block of max_threads^2 tags after the previous one's, so
  // tags of different spaces never coincide (checked at compile time in
  // mpi_link.cpp).
  static constexpr long long tag_of(TagSpace space, int max_threads, int from, int to) {
    const long long pairs = static_cast<long long>(max_threads) * max_threads;
    const long long pair = static_cast<long long>(from) * max_threads + to;
    switch (space) {
      case TagSpace::notice: return 0;
      case TagSpace::link: return 1 + pair;
      case TagSpace::arrival: return 1 + pairs + pair;
    }
    return -1;
  }
  // The highest tag of `space` with `max_threads` thread ranks per process.
  static constexpr long long last_tag(TagSpace space, int max_threads) {
    return tag_of(space, max_threads, max_threads - 1, max_threads - 1);
  }
  // UsageError unless every tag of `space` fits under `tag_ub` (MPI_TAG_UB).
  static void require_tags(TagSpace space, int max_threads, long long tag_ub);

  // `comm` is the private duplicate (the caller keeps and frees it), with
  // MPI_ERRORS_RETURN set; `max_threads` the most thread ranks any process
  // has (UsageError if the tags they need exceed MPI_TAG_UB). Posts the
  // receive for failure notices.
  MpiChannel(MPI_Comm comm, int max_threads);
  ~MpiChannel();  // cancels the notice receive
  MpiChannel(const MpiChannel&) = delete;
  MpiChannel& operator=(const MpiChannel&) = delete;

  MPI_Comm comm() const { return comm_; }
  int tag(TagSpace space, int from_thread, int to_thread) const {
    return static_cast<int>(tag_of(space, max_threads_, from_thread, to_thread));
  }
  int max_threads() const { return max_threads_; }
  // MPI_TAG_UB of the communicator.
  long long tag_ub() const { return tag_ub_; }
  // Held around every MPI call: the process-wide lock below
  // MPI_THREAD_MULTIPLE, nothing at it.
  std::unique_lock<std::mutex> lock() const;

  // Tells every other process of the communicator that this one failed
  // (never throws, never waits for the messages to be received), except
  // those `skip` names: processes known dead (Open MPI's TCP transport
  // fails, and may hang, a send to a process that is gone).
  void notify(ErrorKind kind, const std::string& message, const std::function<bool(int)>& skip = nullptr) noexcept;
  // Keeps MPI progressing until every notice sent has left, or `patience`
  // has passed: an eager send over TCP moves only while MPI is called (a
  // failing rank may make no further call), and a first one must even
  // connect. Notices to processes `needless` names (dead, or told
  // otherwise) are not waited for. Never throws.
  void push_notices(std::chrono::milliseconds patience, const std::function<bool(int)>& needless) noexcept;
  // Throws PeerFailure if a notice has arrived (call with lock() held).
  void poll_notice();
  // Whether this process sent or received a notice (looks once more).
  bool failed();

 private:
  MPI_Comm comm_;
  int max_threads_;
  long long tag_ub_ = 32767;
  int size_ = 1;
  int rank_ = 0;
  bool multiple_ = false;
  MPI_Request notice_ = MPI_REQUEST_NULL;
  std::vector<char> notice_buffer_;
  std::vector<std::vector<char>> sent_notices_;  // kept until the channel goes
  std::vector<MPI_Request> sent_requests_;
  std::vector<int> sent_to_;  // per sent request: the process
  bool noticed_ = false;
  ErrorKind notice_kind_ = ErrorKind::failed;
  std::string notice_text_;
};

class MpiLink final : public Link {
 public:
  // The link of `rank` (a copse rank of `layout`, whose places carry MPI
  // ranks and threads). Both outlive the link.
  MpiLink(MpiChannel& channel, const RankMap& layout, int rank);
  ~MpiLink() override;
  MpiLink(const MpiLink&) = delete;
  MpiLink& operator=(const MpiLink&) = delete;

  void start_send(LinkRank& c, const Transfer& send, const std::byte* data) override;
  bool test_send(LinkRank& c) override;
  void start_recv(LinkRank& c, const Transfer& recv, std::byte* target, Combine side) override;
  bool test_recv(LinkRank& c) override;
  bool can_block() const override { return false; }
  bool combines_in_place() const override { return false; }
  void block(LinkRank&, LinkRank::Wait, const WaitPolicy&) override {}
  void withdraw(LinkRank& c) noexcept override;
  std::string peer_state(const LinkRank& c, int peer) const override;

 private:
  int bytes_of(const LinkRank& c, const Transfer& t) const;
  void poll_notice_now_and_then();

  MpiChannel& channel_;
  const RankMap& layout_;
  int rank_;
  MPI_Request send_ = MPI_REQUEST_NULL;
  MPI_Request recv_ = MPI_REQUEST_NULL;
  std::uint32_t polls_ = 0;
};

// The arrival values of the arrival-aware allreduce (runtime/mpi_comm.cpp): one
// 64-bit value per call from each rank of the layout to every other, on the
// channel's arrival tags (TagSpace::arrival). Per-pair order is MPI's, so
// the values of successive calls never mix. One per thread rank; all calls
// take the channel's lock themselves.
class ArrivalChannel {
 public:
  // The channel of `rank` (a copse rank of `layout`); both outlive it.
  // UsageError if the arrival tags exceed the channel's MPI_TAG_UB.
  ArrivalChannel(MpiChannel& channel, const RankMap& layout, int rank);
  ~ArrivalChannel();  // frees the sends (complete on their own), cancels the receives
  ArrivalChannel(const ArrivalChannel&) = delete;
  ArrivalChannel& operator=(const ArrivalChannel&) = delete;

  // Sends `value` to every other rank. The previous call's sends are waited
  // for first: their values were received before any rank could return from
  // that call, so they complete at once.
  void publish(std::int64_t value);
  // Posts the receives of every other rank's value of this call.
  void post_receives();
  // Looks for failure notices and completed receives: true once every value
  // is in. Throws PeerFailure on a notice.
  bool poll();
  // The ranks whose value is still missing.
  std::vector<int> missing() const;
  // Takes back the open receives (after a failure; never throws).
  void cancel_receives() noexcept;
  // Rank r's value of this call (this rank's own: the one it published).
  std::int64_t value(int r) const { return r == rank_ ? out_ : in_[static_cast<std::size_t>(r)]; }

 private:
  MpiChannel& channel_;
  const RankMap& layout_;
  int rank_;
  std::vector<MPI_Request> sends_, recvs_;  // per copse rank
  std::vector<std::int64_t> in_;            // per copse rank: the values of this call
  std::vector<int> done_;                   // MPI_Testsome's indices
  std::int64_t out_ = 0;                    // this rank's value of the call
};

}  // namespace copse::mpi
