#include "tools/experiment.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <utility>

#include "common/error.hpp"
#include "common/units.hpp"
#include "plan/autotune.hpp"
#include "plan/hierarchical.hpp"

namespace copse {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a tiny generator whose sequence is
// fixed by its definition, so a seed gives the same pattern everywhere
// (std::uniform_real_distribution is not specified bit for bit).
class Uniform {
 public:
  explicit Uniform(std::uint64_t seed) : state_(seed) {}
  double next() {  // in [0, 1)
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  }

 private:
  std::uint64_t state_;
};

// "TEXT[:SEED]" -> TEXT and the seed (default 1).
std::pair<std::string, std::uint64_t> split_seed(const std::string& text, const std::string& what) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {text, 1};
  const std::string seed = text.substr(colon + 1);
  std::size_t used = 0;
  std::uint64_t value = 0;
  try {
    value = std::stoull(seed, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (seed.empty() || used != seed.size() || seed[0] == '-')
    throw UsageError(what + ": the seed \"" + seed + "\" is not a whole number >= 0");
  return {text.substr(0, colon), value};
}

Picos time_picos(const std::string& text, const std::string& what) {
  try {
    return to_picos(parse_time(text));
  } catch (const UsageError& e) {
    throw UsageError(what + ": " + e.what());
  }
}

std::vector<Picos> offsets_from_file(const std::string& path, int ranks) {
  std::ifstream in(path);
  if (!in) throw UsageError("--arrival file:" + path + ": cannot be read");
  std::vector<Picos> offsets;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const auto last = line.find_last_not_of(" \t\r");
    const std::string where = path + ":" + std::to_string(number);
    if (static_cast<int>(offsets.size()) == ranks)
      throw UsageError(where + ": more offsets than the " + std::to_string(ranks) + " ranks");
    offsets.push_back(time_picos(line.substr(first, last - first + 1), where));
  }
  if (static_cast<int>(offsets.size()) != ranks)
    throw UsageError(path + ": " + std::to_string(offsets.size()) + " offsets for " + std::to_string(ranks) +
                     " ranks (one TIME per line, rank 0 first)");
  return offsets;
}

}  // namespace

ArrivalPattern parse_arrival(const std::string& text, int ranks) {
  ArrivalPattern pattern;
  pattern.text = text;
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon), rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  const std::string what = "--arrival " + text;
  if (kind == "none" && colon == std::string::npos) return pattern;
  if (kind == "one-late" && colon != std::string::npos) {
    if (ranks < 2) throw UsageError(what + ": one-late delays rank 1, and there is only one rank");
    pattern.offsets.assign(static_cast<std::size_t>(ranks), 0);
    pattern.offsets[1] = time_picos(rest, what);
  } else if (kind == "rand-late" && colon != std::string::npos) {
    const auto [max_text, seed] = split_seed(rest, what);
    const Picos max = time_picos(max_text, what);
    Uniform u(seed);
    for (int r = 0; r < ranks; ++r)
      pattern.offsets.push_back(static_cast<Picos>(std::floor(u.next() * static_cast<double>(max + 1))));
  } else if (kind == "file" && colon != std::string::npos) {
    pattern.offsets = offsets_from_file(rest, ranks);
  } else {
    throw UsageError("--arrival: unknown pattern \"" + text +
                     "\" (expected none, one-late:DELAY, rand-late:MAX[:SEED] or file:PATH)");
  }
  return pattern;
}

ArrivalError parse_arrival_error(const std::string& text) {
  ArrivalError error;
  error.text = text;
  const std::string what = "--arrival-error " + text;
  const auto [amount, seed] = split_seed(text, what);
  error.seed = seed;
  if (!amount.empty() && amount.back() == '%') {
    error.relative = true;
    std::size_t used = 0;
    try {
      error.amount = std::stod(amount.substr(0, amount.size() - 1), &used) / 100;
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used + 1 != amount.size() || !(error.amount >= 0) || !std::isfinite(error.amount))
      throw UsageError(what + ": expected a percentage >= 0 such as 10%, or a TIME");
  } else {
    error.amount = to_seconds(time_picos(amount, what));
  }
  return error;
}

std::vector<Picos> predict_arrivals(const std::vector<Picos>& actual, const ArrivalError& error) {
  if (error.amount == 0) return actual;
  Uniform u(error.seed);
  std::vector<Picos> predicted;
  for (Picos a : actual) {
    const double w = 2 * u.next() - 1;  // in [-1, 1)
    const double p = error.relative ? static_cast<double>(a) * (1 + w * error.amount)
                                    : static_cast<double>(a) + w * error.amount * 1e12;
    predicted.push_back(std::max<Picos>(0, static_cast<Picos>(std::llround(p))));
  }
  return predicted;
}

ArrivalMeasures arrival_measures(const std::vector<Picos>& finish, const std::vector<Picos>& offsets) {
  ArrivalMeasures m;
  if (finish.empty()) return m;
  const auto arrival = [&](std::size_t r) { return offsets.empty() ? Picos{0} : offsets[r]; };
  Picos last = 0, elapsed = 0;
  for (std::size_t r = 0; r < finish.size(); ++r) last = std::max(last, arrival(r)), elapsed += finish[r] - arrival(r);
  m.after_last_arrival = *std::max_element(finish.begin(), finish.end()) - last;
  m.mean_elapsed = elapsed / static_cast<Picos>(finish.size());
  return m;
}

EmulatedCluster::EmulatedCluster(ClusterSpec spec) : spec_(std::move(spec)) {
  if (spec_.ranks_per_node.empty()) throw UsageError("an emulated cluster needs at least one node");
  long long ranks = 0;
  for (int k : spec_.ranks_per_node) {
    if (k < 1) throw UsageError("a node must hold at least one rank, got " + std::to_string(k));
    ranks += k;
  }
  if (ranks > std::numeric_limits<int>::max())
    throw UsageError("too many ranks for one emulated cluster (" + std::to_string(ranks) + ")");
  ranks_ = static_cast<int>(ranks);

  config_.layout = RankMap::from_node_sizes(spec_.ranks_per_node);
  PlanContext context;
  context.layout = config_.layout;
  context.model = spec_.model;
  context.start = spec_.arrival.offsets;
  context.grouping = spec_.grouping;
  context.node_specs = [sizes = spec_.ranks_per_node, machine = spec_.machine] {
    const Machine m = machine ? *machine : Machine::detect();
    std::vector<NodeSpec> nodes;
    for (int k : sizes) nodes.push_back(NodeSpec{m, k, {}});
    return nodes;
  };
  planner_ = Planner(std::move(context));
  // A hierarchy that cannot be planned is refused now.
  if (spec_.form != Form::flat && spec_.form != Form::automatic) (void)planner_.hierarchy(spec_.form);
  config_.model = spec_.model;
  config_.repetitions = spec_.repetitions;
  config_.wait_timeout = spec_.wait_timeout;
  config_.start = spec_.arrival.offsets;
  check_start_offsets(config_.start, ranks_);
  if (!spec_.predicted_arrival.empty() && spec_.predicted_arrival.size() != static_cast<std::size_t>(ranks_))
    throw UsageError("predicted arrivals: " + std::to_string(spec_.predicted_arrival.size()) + " given for " +
                     std::to_string(ranks_) + " ranks");
}

SimulationOptions EmulatedCluster::simulation(std::size_t element_bytes) const {
  SimulationOptions options;
  options.model = spec_.model;
  options.layout = config_.layout;
  options.element_bytes = element_bytes;
  options.start = spec_.arrival.offsets;
  return options;
}

std::shared_ptr<const PlanHints> EmulatedCluster::hints(std::size_t element_bytes) const {
  return planning_hints(simulation(element_bytes),
                        spec_.predicted_arrival.empty() ? spec_.arrival.offsets : spec_.predicted_arrival);
}

std::shared_ptr<const HierarchyPlan> EmulatedCluster::hierarchy() const {
  if (spec_.form == Form::flat) return nullptr;
  return planner_.hierarchy(spec_.form == Form::automatic ? Form::leader : spec_.form);
}

CallKey EmulatedCluster::key(Collective collective, std::string_view algorithm, std::size_t element_bytes,
                             bool commutative, std::uint64_t count, int root,
                             std::optional<int> requested_blocks) const {
  CallKey key;
  key.collective = collective;
  key.form = spec_.form;
  key.algorithm = algorithm;
  key.count = count;
  key.element_bytes = element_bytes;
  key.commutative = commutative;
  key.root = root;
  key.blocks = requested_blocks.value_or(0);
  key.hints = hints(element_bytes);
  return key;
}

SchedulePlan EmulatedCluster::plan(const AlgorithmInfo& algorithm, const Shape& shape) const {
  if (spec_.form != Form::automatic) return planner_.compose(spec_.form, algorithm, shape);
  // The element size the cluster's hints were made for (hints()).
  const std::size_t element_bytes = shape.hints ? static_cast<std::size_t>(shape.hints->element_bytes) : 1;
  CallKey k = key(algorithm.collective, algorithm.name, element_bytes, true, shape.count, shape.root, shape.blocks);
  k.hints = shape.hints;
  return planner_.plan(k).plan;
}

bool EmulatedCluster::pipelined_across_levels(const AlgorithmInfo& algorithm) const {
  const auto h = hierarchy();
  return h && spec_.form != Form::lanes && runs_as_combined_tree(algorithm) && h->offnode.size() > 1;
}

namespace {

// `algorithm` as the planner compiles it on `cluster`: the requested blocks,
// or the count that minimises simulated time.
CompiledPlan compiled(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm, std::size_t element_bytes,
                      bool commutative, std::uint64_t count, int root, std::optional<int> requested_blocks) {
  return cluster.planner().plan(
      cluster.key(algorithm.collective, algorithm.name, element_bytes, commutative, count, root, requested_blocks));
}

}  // namespace

SimulatedRun run_simulated(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm, std::size_t element_bytes,
                           std::uint64_t count, int root, std::optional<int> requested_blocks, Timeline* timeline) {
  SimulatedRun out;
  const CompiledPlan plan = compiled(cluster, algorithm, element_bytes, true, count, root, requested_blocks);
  out.shape = plan.shape;
  out.blocks = blocks_used(algorithm, out.shape);
  SimulationOptions sim = cluster.simulation(element_bytes);
  sim.timeline = timeline;
  out.result = simulate(plan.plan, out.shape.ranks, sim);
  return out;
}

CheckedEmulation run_checked_emulation(const EmulatedCluster& cluster, const AlgorithmInfo& algorithm,
                                       const ReduceOp& op, std::uint64_t count, int root,
                                       std::optional<int> requested_blocks, Timeline* timeline) {
  check_operator(algorithm, op.name, op.commutative);
  const SimulationOptions sim = cluster.simulation(op.element_bytes);
  CheckedEmulation out;
  const CompiledPlan plan =
      compiled(cluster, algorithm, op.element_bytes, op.commutative, count, root, requested_blocks);
  out.shape = plan.shape;
  out.blocks = blocks_used(algorithm, out.shape);

  const SchedulePlan& schedule = plan.plan;
  EmulatorConfig config = cluster.emulator_config();
  config.record_timeline = timeline != nullptr;
  out.emulation = emulate(algorithm, schedule, out.shape, op, config);
  if (timeline) *timeline = std::move(out.emulation.timeline);
  out.simulated_time = simulate(schedule, out.shape.ranks, sim).time;
  out.matches_simulator = out.simulated_time == out.emulation.virtual_time;
  out.ok = out.emulation.verified && out.matches_simulator;
  if (!out.emulation.verified) {
    out.failure =
        "wrong result: " + (out.emulation.failure.empty() ? std::string("(no detail given)") : out.emulation.failure);
  } else if (!out.matches_simulator) {
    out.failure = "virtual time " + std::to_string(out.emulation.virtual_time) + " ps differs from the simulator's " +
                  std::to_string(out.simulated_time) + " ps";
  }
  return out;
}

Selection select_for_cluster(const EmulatedCluster& cluster, Collective collective, const ReduceOp& op,
                             std::uint64_t count, int root) {
  const Shape shape{cluster.ranks(), count, 1, root, cluster.hints(op.element_bytes)};
  return select_algorithm(collective, shape, cluster.simulation(op.element_bytes), op.commutative,
                          [&cluster](const AlgorithmInfo& a, const Shape& s) { return cluster.plan(a, s); });
}

std::string_view HierarchyForm::shape_name() const {
  switch (shape) {
    case Form::leader: return "single-leader";
    case Form::automatic: return "auto";
    default: return to_string(shape);
  }
  return "?";
}

std::string HierarchyForm::label() const {
  const std::string groups = group > 0 ? "groups of " + std::to_string(group) + ", " : "one group, ";
  switch (shape) {
    case Form::flat: return "flat " + algorithm;
    case Form::leader: return "1 leader, " + groups + algorithm;
    case Form::multi_leader: return "multi-leader, " + groups + algorithm;
    case Form::lanes: return "lanes, " + algorithm;
    case Form::automatic: return "auto, " + algorithm;
  }
  return algorithm;
}

ClusterSpec with_form(ClusterSpec spec, const HierarchyForm& form) {
  const auto& sizes = spec.ranks_per_node;
  if (sizes.empty() || std::any_of(sizes.begin(), sizes.end(), [&](int k) { return k != sizes.front(); }))
    throw UsageError("the hierarchy forms need nodes of equal size");
  const int k = sizes.front();
  spec.form = form.shape;
  if (form.shape != Form::flat) {
    spec.machine = Machine::synthetic("core:" + std::to_string(k) + " pu:1");
    spec.grouping =
        Grouping::parse("size:" + std::to_string(form.group > 0 && form.shape != Form::lanes ? form.group : k));
  }
  return spec;
}

ProficzStudy run_proficz_study(const ProficzStudyOptions& o) {
  const ReduceOp sum = builtin_op("sum", DType::float32);
  auto run = [&](const std::string& name, std::uint64_t bytes, Picos delay, double error) {
    ClusterSpec spec;
    spec.ranks_per_node.assign(static_cast<std::size_t>(o.ranks), 1);
    spec.model = o.model;
    spec.arrival = parse_arrival(delay > 0 ? "one-late:" + std::to_string(delay) + "ps" : "none", o.ranks);
    if (error > 0) {
      ArrivalError e;
      e.amount = error * to_seconds(delay);
      spec.predicted_arrival = predict_arrivals(spec.arrival.offsets, e);
    }
    const EmulatedCluster cluster(std::move(spec));
    const auto r = run_checked_emulation(cluster, find_algorithm(Collective::allreduce, name), sum,
                                         bytes / sum.element_bytes, 0, std::nullopt);
    ProficzRow row;
    row.algorithm = name;
    row.bytes = bytes;
    row.delay = delay;
    row.error = error;
    row.blocks = r.blocks;
    row.measures = arrival_measures(r.emulation.virtual_finish, cluster.spec().arrival.offsets);
    row.ok = r.ok;
    return row;
  };
  auto part = [&](const std::string& name, std::uint64_t bytes, Picos delay, const std::vector<std::string>& algos,
                  const std::vector<double>& errors, ProficzStudy& study) {
    const ProficzRow ring = run("ring", bytes, delay, 0);
    for (const auto& algorithm : algos)
      for (double error : errors) {
        ProficzRow row = algorithm == "ring" ? ring : run(algorithm, bytes, delay, error);
        row.part = name;
        row.ring = ring.measures;
        study.rows.push_back(std::move(row));
      }
  };
  ProficzStudy study;
  study.balanced_ring = run("ring", o.bytes, 0, 0).measures.after_last_arrival;
  auto in_rings = [&](double d) {
    return static_cast<Picos>(std::llround(d * static_cast<double>(study.balanced_ring)));
  };
  for (double d : o.delays) part("delay", o.bytes, in_rings(d), o.algorithms, {0}, study);
  for (std::uint64_t b : o.sizes) part("size", b, in_rings(o.size_delay), o.algorithms, {0}, study);
  std::vector<std::string> aware;
  for (const auto& a : o.algorithms)
    if (find_algorithm(Collective::allreduce, a).arrival_aware) aware.push_back(a);
  part("error", o.bytes, in_rings(o.size_delay), aware, o.errors, study);
  return study;
}

}  // namespace copse
