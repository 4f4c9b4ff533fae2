#pragma once
// A nonblocking or persistent collective's handle (Comm::iallreduce,
// Comm::allreduce_init, ...; runtime/pending.hpp says how calls progress).
// From the thread acting as the rank that made it, like every call of its
// Comm; it must not outlive that Comm.

#include <memory>

namespace copse {

class RankCore;
class PendingCall;

class Request {
 public:
  Request() = default;  // no call: done
  Request(RankCore* core, std::shared_ptr<PendingCall> call, bool persistent);
  Request(const Request&) = default;
  Request(Request&&) noexcept = default;
  Request& operator=(Request other) noexcept;
  // The last Request of a persistent call that is still running hands the
  // call to its rank's queue, which keeps it until it is done (the queue
  // holds a persistent call by address only: a start costs no reference
  // count).
  ~Request();

  // Progresses the rank's outstanding calls, in order, without waiting for
  // any other rank; true once this one is done (a persistent request that
  // is not started is done). Throws the team's failure.
  bool test();
  // Until this one is done (and every call started before it).
  void wait();
  bool done() const;
  // A persistent request, done: runs its call again (UsageError if it is
  // still running or the request is not persistent). Allocates nothing.
  void start();
  bool persistent() const { return persistent_; }
  // wait() allocates nothing (PendingCall::waits_without_allocating).
  bool waits_without_allocating() const;
  explicit operator bool() const { return call_ != nullptr; }

 private:
  RankCore* core_ = nullptr;
  std::shared_ptr<PendingCall> call_;
  bool persistent_ = false;
};

}  // namespace copse
