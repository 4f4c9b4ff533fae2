#pragma once
// What the thread-rank Comm suites (test_comm.cpp, test_comm_failures.cpp)
// share: a team on synthetic nodes, and a function run on every rank's thread.

#include <catch2/catch.hpp>
#include <chrono>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm.hpp"
#include "support.hpp"

namespace copse::testing {

inline constexpr const char* kCommMachine = "package:2 l3:2 core:2 pu:1";

// Nodes of layout[i] ranks each, on a small synthetic machine, and a 30 s
// deadline (a hang fails the test instead of stalling the suite).
inline TeamOptions options_for(const std::vector<int>& layout, const std::string& grouping = "auto",
                               bool multi_leader = false) {
  TeamOptions o;
  for (int k : layout) o.nodes.push_back(NodeSpec{Machine::synthetic(kCommMachine), k, {}});
  o.grouping = Grouping::parse(grouping);
  o.multi_leader = multi_leader;
  o.wait_timeout = std::chrono::milliseconds(30000);
  return o;
}

// Runs fn(comm) on one thread per rank (except `absent`); returns each
// rank's exception, if any.
template <class F>
std::vector<std::exception_ptr> on_every_rank(Team& team, F fn, int absent = -1) {
  const int p = team.size();
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int r = 0; r < p; ++r) {
    if (r == absent) continue;
    threads.emplace_back([&, r] {
      try {
        fn(team.comm(r));
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

// One check per rank that it ended without an exception, naming the rank
// and the message of the one it threw.
inline void check_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (std::size_t r = 0; r < errors.size(); ++r) {
    INFO("rank " << r << ": " << message_of(errors[r]));
    CHECK_FALSE(errors[r]);
  }
}

}  // namespace copse::testing
