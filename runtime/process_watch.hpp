#pragma once
// Whether a process of this host is still there (the MPI runtime's watch on
// its node peers, LinkConfig::peer_gone).

#include <sys/types.h>

namespace copse {

// Whether a process of this host is still there: a pidfd (readable once the
// process has ended, zombie or not, and never confused by a reused pid), or
// kill(pid, 0) where pidfds are missing.
class ProcessWatch {
 public:
  explicit ProcessWatch(pid_t pid);
  ~ProcessWatch();
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  pid_t pid() const { return pid_; }
  bool gone() const;

 private:
  pid_t pid_;
  int fd_ = -1;
};

}  // namespace copse
