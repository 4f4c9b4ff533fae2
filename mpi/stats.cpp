#include "mpi/stats.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"

namespace copse::mpi {

std::string Stats::json_line(int rank, int size) const {
  const auto object = [](const auto& counts) {
    std::string out = "{";
    for (MpiCollective c : kMpiCollectives) {
      if (out.size() > 1) out += ", ";
      out += '"';
      out += to_string(c);
      out += "\": " + std::to_string(counts[index(c)].load());
    }
    return out + "}";
  };
  std::string cma;
  {
    std::lock_guard<std::mutex> lock(cma_mutex_);
    cma = "{\"teams\": " + std::to_string(cma_teams_) + ", \"off\": " + std::to_string(cma_off_) +
          ", \"bytes\": " + std::to_string(cma_bytes_) + ", \"note\": " + json_string(cma_note_) + "}";
  }
  std::string table;
  if (!decided_.empty()) {
    table = ", \"table\": {\"source\": " + json_string(table_source_) + ", \"rows\": [";
    for (std::size_t i = 0; i + 1 < decided_.size(); ++i) table += (i ? ", " : "") + std::to_string(decided_[i].load());
    table += "], \"unmatched\": " + std::to_string(decided_.back().load()) + "}";
  }
  const auto both = [&](const Counts* counts) {
    return "{\"served\": " + object(counts[0]) + ", \"passed\": " + object(counts[1]) + "}";
  };
  return "{\"rank\": " + std::to_string(rank) + ", \"size\": " + std::to_string(size) +
         ", \"served\": " + object(served_) + ", \"passed\": " + object(passed_) + ", \"cma\": " + cma + table +
         ", \"nonblocking\": " + both(nonblocking_) + ", \"persistent\": " + both(persistent_) + "}\n";
}

void Stats::team_done(bool cma, const std::string& note, std::uint64_t attached_bytes) {
  std::lock_guard<std::mutex> lock(cma_mutex_);
  ++(cma ? cma_teams_ : cma_off_);
  if (note != "on" && cma_note_.empty()) cma_note_ = note;  // off, or for allgathers alone: why
  cma_bytes_ += attached_bytes;
}

void append_line(const std::string& path, std::string_view line, std::string_view what) {
  const auto fail = [&](const char* action) {
    throw SystemError("cannot " + std::string(action) + " the " + std::string(what) + " " + path + ": " +
                      std::strerror(errno));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail("open");
  ssize_t written = 0;
  do {
    written = ::write(fd, line.data(), line.size());
  } while (written < 0 && errno == EINTR);
  const int write_errno = errno;
  ::close(fd);
  errno = write_errno;
  if (written < 0) fail("write");
  // A regular file takes a short line whole unless the disk is full; a second
  // write could land after another process's line, so say so instead.
  if (static_cast<std::size_t>(written) != line.size()) {
    errno = ENOSPC;
    fail("write the whole line to");
  }
}

}  // namespace copse::mpi
