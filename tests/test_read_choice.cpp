// runtime/read_choice.hpp: every rank's choice between reading and copying
// follows from the calls it counts and the times the team agrees on.
#include <catch2/catch.hpp>

#include "runtime/read_choice.hpp"

namespace copse {

namespace {

// Runs `calls` calls of one kind, the copy taking `copy` seconds and the read
// `read`, agreeing (as a team of one) where a trial ends. Returns the ways
// taken, 'c' or 'r', and how many agreements there were.
std::pair<std::string, int> run(ReadChoice& choice, Collective c, std::size_t bytes, int calls, double copy,
                                double read) {
  std::string ways;
  int agreements = 0;
  for (int i = 0; i < calls; ++i) {
    const bool reads = choice.reads(c, bytes);
    ways += reads ? 'r' : 'c';
    if (choice.timed(reads ? read : copy)) {
      choice.agree(choice.trial_times());
      ++agreements;
    }
  }
  return {ways, agreements};
}

}  // namespace

TEST_CASE("read choice: broadcasts, allgathers, reduces and reduce-scatters of 8 KiB and more") {
  for (Collective c : {Collective::bcast, Collective::allgather, Collective::reduce, Collective::reduce_scatter}) {
    CHECK(ReadChoice::chooses(c, ReadChoice::kFromBytes));
    CHECK(ReadChoice::chooses(c, std::size_t{1} << 40));
    CHECK_FALSE(ReadChoice::chooses(c, ReadChoice::kFromBytes - 1));
  }
  for (Collective c :
       {Collective::allreduce, Collective::barrier, Collective::scatter, Collective::gather, Collective::alltoall})
    CHECK_FALSE(ReadChoice::chooses(c, std::size_t{1} << 20));
}

TEST_CASE("read choice: a kind's trials copy, then read, then it takes the faster way until the next trial") {
  constexpr int trial = 2 * ReadChoice::kTrialCalls;
  constexpr auto every = static_cast<int>(ReadChoice::kTrialEvery);
  for (const bool read_faster : {false, true}) {
    ReadChoice choice;
    const auto [ways, agreements] =
        run(choice, Collective::reduce, 512 << 10, 3 * every, read_faster ? 2.0 : 1.0, read_faster ? 1.0 : 2.0);
    CHECK(agreements == 3);
    const std::string tried = std::string(trial / 2, 'c') + std::string(trial / 2, 'r');
    const std::string chosen(static_cast<std::size_t>(every - trial), read_faster ? 'r' : 'c');
    CHECK(ways == tried + chosen + tried + chosen + tried + chosen);
  }
}

TEST_CASE("read choice: the team's slowest median decides, and a kind follows a change at its next trial") {
  ReadChoice choice;
  // This rank found the read faster, but the team's slowest rank did not.
  for (int i = 0; i < 2 * ReadChoice::kTrialCalls; ++i) {
    const bool reads = choice.reads(Collective::bcast, 64 << 10);
    // One outlier per way (its first call): medians, not means, decide.
    const double seconds = (reads ? 1.0 : 3.0) * (i % ReadChoice::kTrialCalls == 0 ? 100 : 1);
    if (choice.timed(seconds)) {
      CHECK(choice.trial_times() == std::array<double, 2>{3.0, 1.0});
      choice.agree({3.0, 4.0});
    }
  }
  CHECK_FALSE(choice.reads(Collective::bcast, 64 << 10));
  choice.timed(1.0);
  // Until the next trial, where the read is now faster everywhere.
  auto [ways, agreements] =
      run(choice, Collective::bcast, 64 << 10, static_cast<int>(ReadChoice::kTrialEvery), 5.0, 1.0);
  CHECK(agreements == 1);
  CHECK(ways.back() == 'r');
  CHECK(ways.find('r') == ReadChoice::kTrialEvery - 2 * ReadChoice::kTrialCalls + ReadChoice::kTrialCalls - 1);
}

TEST_CASE("read choice: each collective and power of two counts and chooses on its own") {
  ReadChoice choice;
  run(choice, Collective::allgather, 16 << 10, 2 * ReadChoice::kTrialCalls, 2.0, 1.0);  // reads from now on
  run(choice, Collective::reduce, 16 << 10, 2 * ReadChoice::kTrialCalls, 1.0, 2.0);     // copies
  CHECK(choice.reads(Collective::allgather, 16 << 10));
  choice.timed(1.0);
  CHECK(choice.reads(Collective::allgather, (32 << 10) - 1));  // the same power of two
  choice.timed(1.0);
  CHECK_FALSE(choice.reads(Collective::reduce, 16 << 10));
  choice.timed(1.0);
  run(choice, Collective::reduce_scatter, 16 << 10, 2 * ReadChoice::kTrialCalls, 3.0, 1.0);  // reads
  CHECK(choice.reads(Collective::reduce_scatter, 16 << 10));
  choice.timed(1.0);
  CHECK_FALSE(choice.reads(Collective::reduce, 16 << 10));  // unmoved
  choice.timed(1.0);
  // A power of two not called yet starts its own trial with the copies, then the reads.
  const auto [ways, agreements] = run(choice, Collective::allgather, 32 << 10, 2 * ReadChoice::kTrialCalls, 1.0, 1.0);
  CHECK(ways == std::string(ReadChoice::kTrialCalls, 'c') + std::string(ReadChoice::kTrialCalls, 'r'));
  CHECK(agreements == 1);
  CHECK_FALSE(choice.reads(Collective::bcast, 16 << 10));
}

}  // namespace copse
