#include "tools/replay.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "algorithms/registry.hpp"
#include "common/error.hpp"
#include "common/units.hpp"
#include "plan/autotune.hpp"
#include "plan/planner.hpp"
#include "runtime/comm.hpp"

namespace copse {

namespace {

using Json = nlohmann::json;

struct MpiName {
  std::string_view name;
  Collective collective;
};
constexpr MpiName kMpiNames[] = {
    {"allreduce", Collective::allreduce},
    {"reduce", Collective::reduce},
    {"bcast", Collective::bcast},
    {"barrier", Collective::barrier},
    {"allgather", Collective::allgather},
    {"reduce_scatter_block", Collective::reduce_scatter},
    {"reduce_scatter", Collective::reduce_scatter},
    {"scatter", Collective::scatter},
    {"gather", Collective::gather},
    {"alltoall", Collective::alltoall},
};

// One line of the file, checked; `where` is "PATH:LINE".
TraceCall parse_line(const std::string& text, const std::string& where, int line) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw UsageError(where + ": not a JSON object (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw UsageError(where + ": not a JSON object");
  const auto get = [&](const char* key, bool required) -> const Json* {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required) throw UsageError(where + ": no \"" + key + "\"");
      return nullptr;
    }
    return &*it;
  };
  const auto integer = [&](const char* key, long long minimum, bool required, long long fallback) -> long long {
    const Json* v = get(key, required);
    if (!v) return fallback;
    if (!v->is_number_integer() || v->get<long long>() < minimum)
      throw UsageError(where + ": \"" + key + "\" must be a whole number >= " + std::to_string(minimum) + ", got " +
                       v->dump());
    return v->get<long long>();
  };
  const auto seconds = [&](const char* key, bool required) -> double {
    const Json* v = get(key, required);
    if (!v) return 0;
    if (!v->is_number() || !(v->get<double>() >= 0) || !std::isfinite(v->get<double>()))
      throw UsageError(where + ": \"" + key + "\" must be a number of seconds >= 0, got " + v->dump());
    return v->get<double>();
  };
  const auto text_of = [&](const char* key, bool required, std::string fallback) -> std::string {
    const Json* v = get(key, required);
    if (!v) return fallback;
    if (!v->is_string()) throw UsageError(where + ": \"" + key + "\" must be a string, got " + v->dump());
    return v->get<std::string>();
  };

  TraceCall c;
  c.line = line;
  c.size = static_cast<int>(std::min<long long>(integer("size", 1, true, 1), 1 << 30));
  c.rank = static_cast<int>(std::min<long long>(integer("rank", 0, true, 0), 1 << 30));
  if (c.rank >= c.size)
    throw UsageError(where + ": rank " + std::to_string(c.rank) + " is not below size " + std::to_string(c.size));
  c.call = integer("call", 0, true, 0);
  c.collective = text_of("collective", true, "");
  try {
    replay_collective(c.collective);
  } catch (const UsageError& e) {
    throw UsageError(where + ": " + e.what());
  }
  c.comm_size = static_cast<int>(std::min<long long>(integer("comm_size", 1, true, 1), 1 << 30));
  if (c.comm_size > c.size)
    throw UsageError(where + ": comm_size " + std::to_string(c.comm_size) + " is larger than size " +
                     std::to_string(c.size));
  c.count = static_cast<std::uint64_t>(integer("count", 0, true, 0));
  c.type_size = static_cast<std::uint64_t>(integer("type_size", 0, true, 0));
  if (c.type_size != 0 && c.count > (std::uint64_t{1} << 62) / c.type_size)
    throw UsageError(where + ": count x type_size is too many bytes");
  c.op = text_of("op", false, "");
  c.root = static_cast<int>(std::min<long long>(integer("root", -1, false, -1), 1 << 30));
  if ((c.collective == "reduce" || c.collective == "bcast") && (c.root < 0 || c.root >= c.comm_size))
    throw UsageError(where + ": " + c.collective + " needs a root in [0, comm_size), got " + std::to_string(c.root));
  if (const Json* v = get("served", false)) {
    if (!v->is_boolean()) throw UsageError(where + ": \"served\" must be true or false, got " + v->dump());
    c.served = v->get<bool>();
  }
  c.site = text_of("site", false, "?");
  c.t = seconds("t", false);
  c.gap = seconds("gap", true);
  c.duration = seconds("duration", false);
  return c;
}

std::string at(const std::string& path, int line) { return path + ":" + std::to_string(line); }

}  // namespace

Collective replay_collective(const std::string& name) {
  for (const auto& n : kMpiNames)
    if (n.name == name) return n.collective;
  std::string known;
  for (const auto& n : kMpiNames) known += (known.empty() ? "" : ", ") + std::string(n.name);
  throw UsageError("unknown collective \"" + name + "\" (expected " + known + ")");
}

Trace read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot be read");
  Trace trace;
  trace.path = path;
  std::string text;
  int first_line = 0;  // the line that fixed the processes' count
  for (int line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    TraceCall c = parse_line(text, at(path, line), line);
    if (trace.processes == 0) {
      trace.processes = c.size;
      first_line = line;
      trace.calls.resize(static_cast<std::size_t>(c.size));
    } else if (c.size != trace.processes) {
      throw UsageError(at(path, line) + ": size " + std::to_string(c.size) + ", but line " +
                       std::to_string(first_line) + " says " + std::to_string(trace.processes));
    }
    auto& mine = trace.calls[static_cast<std::size_t>(c.rank)];
    const auto index = static_cast<std::size_t>(c.call);
    if (index > (std::size_t{1} << 26)) throw UsageError(at(path, line) + ": call number too large");
    if (mine.size() <= index) mine.resize(index + 1);
    if (mine[index].line != 0)
      throw UsageError(at(path, line) + ": rank " + std::to_string(c.rank) + "'s call " + std::to_string(c.call) +
                       " again (first at line " + std::to_string(mine[index].line) + ")");
    mine[index] = std::move(c);
  }
  if (trace.processes == 0) throw UsageError(path + ": no calls in the trace");
  for (int r = 0; r < trace.processes; ++r) {
    const auto& mine = trace.calls[static_cast<std::size_t>(r)];
    if (mine.empty()) throw UsageError(path + ": no calls of rank " + std::to_string(r));
    for (std::size_t i = 0; i < mine.size(); ++i)
      if (mine[i].line == 0)
        throw UsageError(path + ": rank " + std::to_string(r) + "'s call " + std::to_string(i) + " is missing");
  }
  const auto& first = trace.calls.front();
  for (int r = 1; r < trace.processes; ++r) {
    const auto& mine = trace.calls[static_cast<std::size_t>(r)];
    if (mine.size() != first.size())
      throw UsageError(path + ": rank " + std::to_string(r) + " made " + std::to_string(mine.size()) +
                       " calls, rank 0 " + std::to_string(first.size()) +
                       " (replay needs every process to make the same calls)");
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const TraceCall &a = first[i], &b = mine[i];
      if (a.collective != b.collective || a.comm_size != b.comm_size || a.bytes() != b.bytes() ||
          replay_collective(a.collective) != replay_collective(b.collective))
        throw UsageError(at(path, b.line) + ": call " + std::to_string(i) + " is " + b.collective + " of " +
                         std::to_string(b.bytes()) + " bytes on " + std::to_string(b.comm_size) +
                         " processes, but rank 0's (line " + std::to_string(a.line) + ") is " + a.collective + " of " +
                         std::to_string(a.bytes()) + " bytes on " + std::to_string(a.comm_size) +
                         " (replay needs every process to make the same calls)");
    }
  }
  return trace;
}

namespace {

// A collective as the simulator runs it.
struct Problem {
  Collective collective;
  std::uint64_t count;
  std::uint64_t element_bytes;
  int root;
};

Problem problem_of(const TraceCall& c, int group) {
  const std::uint64_t element = std::max<std::uint64_t>(c.type_size, 1);
  const int root = c.root < 0 ? 0 : c.root % group;
  const Collective collective = replay_collective(c.collective);
  // Bytes only, as the interposer serves them (scatter, gather, alltoall: a block's).
  if (c.collective == "bcast" || c.collective == "allgather" || !has_hierarchy(collective))
    return {collective, c.bytes(), 1, root};
  if (c.collective == "barrier") return {collective, 1, 1, 0};
  if (c.collective == "reduce_scatter")  // the whole input, in blocks of the largest count
    return {collective, (c.count + static_cast<std::uint64_t>(group) - 1) / static_cast<std::uint64_t>(group), element,
            root};
  return {collective, c.count, element, root};
}

struct Planned {
  const AlgorithmInfo* algorithm = nullptr;
  Shape shape;
  SchedulePlan plan;
  int blocks = 1;
};

class Replayer {
 public:
  Replayer(const Trace& trace, const ReplayOptions& options) : trace_(trace), options_(options) {
    node_sizes_ = options.cluster.ranks_per_node;
    if (node_sizes_.empty()) throw UsageError("replay: the cluster has no nodes");
    for (int k : node_sizes_) {
      if (k < 1) throw UsageError("replay: a node must hold at least one rank");
      ranks_ += k;
    }
    if (!(options.compute_scale >= 0) || !std::isfinite(options.compute_scale))
      throw UsageError("replay: the compute scale must be a number >= 0");
    for (const auto& [c, name] : options.algorithms) find_algorithm(c, name);  // known?
  }

  ReplayResult run() {
    const auto P = static_cast<std::size_t>(ranks_);
    const int W = trace_.processes;
    std::vector<Picos> clock(P, 0), arrival(P, 0), finish(P, 0);
    Picos compute_sum = 0;
    ReplayResult result;
    result.ranks = ranks_;
    result.processes = W;
    std::map<std::tuple<std::string, std::string, std::uint64_t, int>, std::size_t> site_index;

    for (std::size_t i = 0; i < trace_.sequence_length(); ++i) {
      const TraceCall& call = trace_.calls.front()[i];
      for (std::size_t r = 0; r < P; ++r) {
        const double gap = trace_.calls[r % static_cast<std::size_t>(W)][i].gap * options_.compute_scale;
        const Picos g = to_picos(gap);
        compute_sum += g;
        arrival[r] = clock[r] + g;
      }
      const int group =
          call.comm_size >= W
              ? ranks_
              : std::clamp(static_cast<int>(std::lround(static_cast<double>(call.comm_size) * ranks_ / W)), 1, ranks_);
      Picos after_last = 0;
      const Planned* used = nullptr;
      for (int first = 0; first < ranks_; first += group) {
        const int g = std::min(group, ranks_ - first);
        const Planned* p = run_group(call, first, g, arrival, finish);
        if (p && (!used || g == group)) used = p;
        const auto b = arrival.begin() + first, e = b + g;
        const Picos last = *std::max_element(b, e);
        after_last = std::max(after_last, *std::max_element(finish.begin() + first, finish.begin() + first + g) - last);
      }
      Picos elapsed = 0;
      for (std::size_t r = 0; r < P; ++r) elapsed += finish[r] - arrival[r], clock[r] = finish[r];
      elapsed /= static_cast<Picos>(P);
      double traced = 0;
      for (int r = 0; r < W; ++r) traced += trace_.calls[static_cast<std::size_t>(r)][i].duration;
      traced /= W;

      const auto key = std::make_tuple(call.site, call.collective, call.bytes(), call.comm_size);
      auto [it, inserted] = site_index.emplace(key, result.sites.size());
      if (inserted) {
        ReplaySite s;
        s.site = call.site;
        s.collective = call.collective;
        s.bytes = call.bytes();
        s.comm_size = call.comm_size;
        s.group = group;
        s.algorithm = std::string(used ? used->algorithm->name : algorithm(replay_collective(call.collective)).name);
        s.blocks = used ? used->blocks : 1;
        result.sites.push_back(std::move(s));
      }
      ReplaySite& s = result.sites[it->second];
      ++s.calls;
      s.time += elapsed;
      s.after_last += after_last;
      s.traced += traced;
      ++result.calls;
      result.time += elapsed;
      result.after_last += after_last;
      result.traced += traced;
    }
    result.compute = compute_sum / static_cast<Picos>(P);
    result.end = *std::max_element(clock.begin(), clock.end());
    for (const auto& mine : trace_.calls)
      if (!mine.empty()) result.traced_end = std::max(result.traced_end, mine.back().t + mine.back().duration);
    return result;
  }

 private:
  std::string algorithm_name(Collective c) const {
    const auto it = options_.algorithms.find(c);
    if (it != options_.algorithms.end()) return it->second;
    static const TeamOptions defaults;  // the thread Team's algorithm per collective
    return copse::algorithm_name(defaults, c);
  }
  const AlgorithmInfo& algorithm(Collective c) const { return find_algorithm(c, algorithm_name(c)); }

  // The cluster of ranks [first, first + g): the nodes' layout cut to that range.
  const EmulatedCluster& cluster(int first, int g) {
    std::vector<int> sizes;
    int begin = 0;
    for (int k : node_sizes_) {
      const int lo = std::max(begin, first), hi = std::min(begin + k, first + g);
      if (hi > lo) sizes.push_back(hi - lo);
      begin += k;
    }
    auto& slot = clusters_[sizes];
    if (!slot) {
      ClusterSpec spec = options_.cluster;
      spec.ranks_per_node = sizes;
      spec.arrival = ArrivalPattern{};
      spec.predicted_arrival.clear();
      slot = std::make_unique<EmulatedCluster>(std::move(spec));
    }
    return *slot;
  }

  // Simulates one group's call: finish[first .. first+g) from arrival[...].
  const Planned* run_group(const TraceCall& call, int first, int g, const std::vector<Picos>& arrival,
                           std::vector<Picos>& finish) {
    const auto b = arrival.begin() + first, e = b + g;
    const Picos start = *std::min_element(b, e);
    if (g == 1) {  // nothing to exchange
      finish[static_cast<std::size_t>(first)] = arrival[static_cast<std::size_t>(first)];
      return nullptr;
    }
    const EmulatedCluster& c = cluster(first, g);
    const Problem pr = problem_of(call, g);
    const AlgorithmInfo& alg = algorithm(pr.collective);
    SimulationOptions sim = c.simulation(pr.element_bytes);
    sim.start.assign(b, e);
    for (Picos& s : sim.start) s -= start;

    Planned one;
    const Planned* p = nullptr;
    if (alg.arrival_aware) {  // planned from this call's arrivals
      one.algorithm = &alg;
      one.shape = Shape{g, pr.count, 1, pr.root, planning_hints(sim, sim.start)};
      one.shape.blocks =
          resolve_blocks([&](const Shape& s) { return c.plan(alg, s); }, alg, one.shape, options_.blocks, sim);
      one.blocks = blocks_used(alg, one.shape);
      one.plan = c.plan(alg, one.shape);
      p = &one;
    } else {
      p = &planned(c, alg, pr, g);
    }
    const SimulationResult r = simulate(p->plan, g, sim);
    for (int k = 0; k < g; ++k)
      finish[static_cast<std::size_t>(first + k)] = start + r.finish[static_cast<std::size_t>(k)];
    if (p == &one) {
      last_aware_ = std::move(one);
      return &last_aware_;
    }
    return p;
  }

  const Planned& planned(const EmulatedCluster& c, const AlgorithmInfo& alg, const Problem& pr, int g) {
    const auto key = std::make_tuple(&c, alg.collective, pr.count, pr.element_bytes, pr.root);
    auto& slot = plans_[key];
    if (!slot) {
      auto p = std::make_unique<Planned>();
      p->algorithm = &alg;
      SimulationOptions balanced = c.simulation(pr.element_bytes);
      balanced.start.clear();
      p->shape = Shape{g, pr.count, 1, pr.root, c.hints(pr.element_bytes)};
      p->shape.blocks =
          resolve_blocks([&](const Shape& s) { return c.plan(alg, s); }, alg, p->shape, options_.blocks, balanced);
      p->blocks = blocks_used(alg, p->shape);
      p->plan = c.plan(alg, p->shape);
      slot = std::move(p);
    }
    return *slot;
  }

  const Trace& trace_;
  const ReplayOptions& options_;
  std::vector<int> node_sizes_;
  int ranks_ = 0;
  std::map<std::vector<int>, std::unique_ptr<EmulatedCluster>> clusters_;
  std::map<std::tuple<const EmulatedCluster*, Collective, std::uint64_t, std::uint64_t, int>, std::unique_ptr<Planned>>
      plans_;
  Planned last_aware_;  // the last call's plan of an arrival-aware algorithm
};

}  // namespace

ReplayResult replay(const Trace& trace, const ReplayOptions& options) {
  if (trace.processes < 1 || trace.calls.size() != static_cast<std::size_t>(trace.processes))
    throw UsageError("replay: an empty trace");
  return Replayer(trace, options).run();
}

}  // namespace copse
