// An out-of-tree program built against an installed copse (tests/install/run.sh):
// with find_package(copse) and copse::copse, and with pkg-config's copse.pc.
// It touches every dependency the installed static library brings: the
// configuration read from a TOML file (toml++), a Team of thread ranks on two
// emulated nodes planned over this machine's topology (hwloc, threads), and an
// allreduce whose result it checks. Exit 0 when the sum is right.
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "runtime/comm.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer SCRATCH_TOML\n");
    return 2;
  }
  std::ofstream(argv[1]) << "[collectives]\nallreduce = \"ring\"\n";
  copse::LoadArgs args;
  args.config_file = argv[1];
  args.environment.emplace();  // not the caller's COPSE_* variables
  const copse::Config config = copse::Config::load(args);
  const int nodes[] = {2, 2};
  copse::Team team(copse::make_team_options(config.options(), nodes));

  constexpr std::size_t kCount = 1000;
  const copse::ReduceOp sum = copse::builtin_op("sum", copse::DType::int64);
  std::vector<std::vector<long long>> results(static_cast<std::size_t>(team.size()));
  std::vector<std::thread> ranks;
  for (int r = 0; r < team.size(); ++r)
    ranks.emplace_back([&, r] {
      std::vector<long long> send(kCount, r + 1);
      auto& recv = results[static_cast<std::size_t>(r)];
      recv.assign(kCount, -1);
      team.comm(r).allreduce(send.data(), recv.data(), kCount, sum);
    });
  for (auto& t : ranks) t.join();

  const long long want = static_cast<long long>(team.size()) * (team.size() + 1) / 2;
  for (int r = 0; r < team.size(); ++r)
    for (const long long v : results[static_cast<std::size_t>(r)])
      if (v != want) {
        std::fprintf(stderr, "consumer: rank %d got %lld, expected %lld\n", r, v, want);
        return 1;
      }
  std::printf("consumer: %d thread ranks on 2 nodes, allreduce (%s) of %zu int64: ok\n", team.size(),
              config.options().collectives.allreduce.c_str(), kCount);
  return 0;
}
