#include "runtime/process_watch.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace copse {

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid) {
#ifdef SYS_pidfd_open
  fd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) close(fd_);
}

bool ProcessWatch::gone() const {
  if (fd_ >= 0) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  return kill(pid_, 0) != 0 && errno == ESRCH;
}

}  // namespace copse
