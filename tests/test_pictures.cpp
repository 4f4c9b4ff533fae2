// Pictures (algorithms/timeline.hpp, algorithms/comm_graph.hpp): the
// simulator's and the emulator's timelines agree event for event and end at
// the reported times; the Gantt SVG parses as XML with a row per rank and a
// bar per send; the communication graph has the schedule's edges (binomial
// reduce: one edge from every non-root rank to its parent); the Chrome trace
// passes a schema check (types, ts monotone per thread, both clocks, the
// virtual end equal to the virtual time).
#include <boost/property_tree/ptree.hpp>
#include <boost/property_tree/xml_parser.hpp>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "algorithms/comm_graph.hpp"
#include "algorithms/registry.hpp"
#include "algorithms/simulator.hpp"
#include "algorithms/timeline.hpp"
#include "tools/experiment.hpp"

using namespace copse;

namespace {

auto key(const TimelineEvent& e) {
  return std::tuple(e.rank, e.step, static_cast<int>(e.activity), e.peer, e.offset, e.count, e.start, e.end);
}

std::vector<std::tuple<int, std::uint64_t, int, int, std::uint64_t, std::uint64_t, Picos, Picos>> keys(
    const Timeline& t) {
  std::vector<decltype(key(t.front()))> out;
  for (const auto& e : t) out.push_back(key(e));
  std::sort(out.begin(), out.end());
  return out;
}

ClusterSpec two_nodes_of_four(const CostModel& model) {
  ClusterSpec spec;
  spec.ranks_per_node = {4, 4};
  spec.model = model;
  return spec;
}

// Every element of an XML tree with attribute class == `cls`.
int count_class(const boost::property_tree::ptree& tree, const std::string& cls) {
  int n = 0;
  for (const auto& [name, child] : tree) {
    if (name == "<xmlattr>") continue;
    if (child.get<std::string>("<xmlattr>.class", "") == cls) ++n;
    n += count_class(child, cls);
  }
  return n;
}

}  // namespace

TEST_CASE("the simulator's timeline covers every message and ends at each rank's finish", "[pictures]") {
  for (const char* name : {"ring", "binomial", "two-tree", "rabenseifner"}) {
    const AlgorithmInfo& a = find_algorithm(Collective::allreduce, name);
    const Shape shape{6, 600, 3, 0};
    for (bool loggp : {false, true}) {
      SimulationOptions options;
      if (loggp) options.model = CostModel::cluster();
      options.layout = RankMap::uniform(6, 3);
      Timeline timeline;
      options.timeline = &timeline;
      const SimulationResult result = simulate(a.plan(shape), 6, options);
      INFO(name << (loggp ? " loggp" : " hockney"));
      std::uint64_t sends = 0, recvs = 0;
      std::vector<Picos> last(6, 0);
      for (const auto& e : timeline) {
        REQUIRE(e.start <= e.end);
        REQUIRE(e.start >= 0);
        sends += e.activity == Activity::send;
        recvs += e.activity == Activity::recv;
        last[static_cast<std::size_t>(e.rank)] = std::max(last[static_cast<std::size_t>(e.rank)], e.end);
      }
      CHECK(sends == result.messages);
      CHECK(recvs == result.messages);
      CHECK(last == result.finish);
      // Off: nothing recorded, same times.
      SimulationOptions off = options;
      off.timeline = nullptr;
      CHECK(simulate(a.plan(shape), 6, off).finish == result.finish);
    }
  }
}

TEST_CASE("the emulator's virtual timeline equals the simulator's", "[pictures]") {
  for (bool loggp : {false, true}) {
    const EmulatedCluster cluster(two_nodes_of_four(loggp ? CostModel::cluster() : CostModel()));
    for (const char* name : {"ring", "dual-root", "two-tree", "recursive-doubling"}) {
      const AlgorithmInfo& a = find_algorithm(Collective::allreduce, name);
      Timeline emulated;
      const CheckedEmulation run =
          run_checked_emulation(cluster, a, builtin_op("sum", DType::int32), 1000, 0, std::nullopt, &emulated);
      REQUIRE(run.ok);
      Timeline simulated;
      const SimulatedRun sim = run_simulated(cluster, a, 4, 1000, 0, run.shape.blocks, &simulated);
      INFO(name << (loggp ? " loggp" : " hockney") << ", " << run.blocks << " blocks");
      CHECK(sim.result.time == run.emulation.virtual_time);
      CHECK(keys(emulated) == keys(simulated));
      for (const auto& e : emulated) {
        REQUIRE(e.wall_start_ns > 0);
        REQUIRE(e.wall_start_ns <= e.wall_end_ns);
      }
    }
  }
}

TEST_CASE("the Gantt SVG parses as XML with a row per rank and a bar per send", "[pictures]") {
  // A ring with one colour per block: no two sends in a row carry the same
  // block, so none is merged with the next.
  const int p = 5;
  const AlgorithmInfo& ring = find_algorithm(Collective::allreduce, "ring");
  const Shape shape{p, 1000, 1, 0};
  SimulationOptions options;
  Timeline timeline;
  options.timeline = &timeline;
  const SimulationResult result = simulate(ring.plan(shape), p, options);
  GanttOptions gantt;
  gantt.title = "ring <p=5> & friends";  // escaped
  gantt.vector_elements = 1000;
  gantt.segments = p;
  std::stringstream svg;
  write_gantt_svg(svg, timeline, p, gantt);
  boost::property_tree::ptree tree;
  REQUIRE_NOTHROW(boost::property_tree::read_xml(svg, tree));
  REQUIRE(tree.count("svg") == 1);
  CHECK(count_class(tree, "rank") == p);
  CHECK(count_class(tree, "send") == static_cast<int>(result.messages));
  CHECK(count_class(tree, "recv") == static_cast<int>(result.messages));
  CHECK(count_class(tree, "swatch") == p);
  CHECK(svg.str().find("ring &lt;p=5&gt; &amp; friends") != std::string::npos);

  // Large p: the first max_rows ranks, and the picture says so.
  const int big = 300;
  Timeline many;
  options.timeline = &many;
  options.timeline_ranks = 64;
  simulate(ring.plan(Shape{big, 3000, 1, 0}), big, options);
  std::stringstream big_svg;
  write_gantt_svg(big_svg, many, big, GanttOptions{});
  boost::property_tree::ptree big_tree;
  REQUIRE_NOTHROW(boost::property_tree::read_xml(big_svg, big_tree));
  CHECK(count_class(big_tree, "rank") == 64);
  CHECK(big_svg.str().find("showing ranks 0-63 only") != std::string::npos);
}

TEST_CASE("the communication graph of binomial reduce is its tree", "[pictures]") {
  const AlgorithmInfo& a = find_algorithm(Collective::reduce, "binomial");
  const Shape shape{8, 17, 1, 0};
  const CommGraph g = communication_graph(a.plan(shape), shape, a.pipelined_parts);
  REQUIRE(g.edges.size() == 7);
  std::set<int> senders;
  for (const auto& e : g.edges) {
    senders.insert(e.from);
    CHECK(e.to == (e.from & (e.from - 1)));  // binomial parent: the lowest set bit cleared
    CHECK(e.steps.size() == 1);
  }
  CHECK(senders == std::set<int>{1, 2, 3, 4, 5, 6, 7});
  std::stringstream dot;
  write_dot(dot, g, DotOptions{"binomial", 0, {}});
  int arrows = 0;
  for (std::string line; std::getline(dot, line);) arrows += line.find(" -> ") != std::string::npos;
  CHECK(arrows == 7);
}

TEST_CASE("two-tree's graph has both trees, one colour per part", "[pictures]") {
  const AlgorithmInfo& a = find_algorithm(Collective::allreduce, "two-tree");
  REQUIRE(a.pipelined_parts == 2);
  const Shape shape{8, 40, 2, 0};
  const CommGraph g = communication_graph(a.plan(shape), shape, a.pipelined_parts);
  std::map<int, std::set<std::pair<int, int>>> tree_edges;  // part -> undirected edges
  for (const auto& e : g.edges) tree_edges[e.part].insert({std::min(e.from, e.to), std::max(e.from, e.to)});
  REQUIRE(tree_edges.size() == 2);
  CHECK(tree_edges[0].size() == 7);  // each a spanning tree of 8 ranks
  CHECK(tree_edges[1].size() == 7);
  for (const auto& e : g.edges) CHECK(e.blocks.size() == e.steps.size());
  std::stringstream dot;
  write_dot(dot, g, DotOptions{});
  CHECK(dot.str().find("#1f77b4") != std::string::npos);
  CHECK(dot.str().find("#d62728") != std::string::npos);
  CHECK(ranges_text({7, 1, 2, 3, 9, 3}) == "1-3,7,9");
}

TEST_CASE("the Chrome trace passes the schema check with both clocks", "[pictures]") {
  const EmulatedCluster cluster(two_nodes_of_four(CostModel::cluster()));
  Timeline timeline;
  const CheckedEmulation run = run_checked_emulation(cluster, find_algorithm(Collective::allreduce, "dual-root"),
                                                     builtin_op("sum", DType::int32), 5000, 0, std::nullopt, &timeline);
  REQUIRE(run.ok);
  std::stringstream text;
  write_chrome_trace(text, timeline, cluster.ranks(), TraceOptions{"dual-root", true});
  const auto j = nlohmann::json::parse(text.str());
  REQUIRE(j.contains("traceEvents"));
  REQUIRE(j["traceEvents"].is_array());
  std::map<std::pair<int, int>, double> last_ts;
  std::set<int> pids;
  Picos virtual_end = 0;
  int complete = 0;
  for (const auto& e : j["traceEvents"]) {
    REQUIRE(e["name"].is_string());
    REQUIRE(e["ph"].is_string());
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e["tid"].is_number_integer());
    REQUIRE(e["ts"].is_number());
    if (e["ph"] == "M") {
      REQUIRE(e["args"].is_object());
      continue;
    }
    REQUIRE(e["ph"] == "X");
    REQUIRE(e["dur"].is_number());
    REQUIRE(e["dur"].get<double>() >= 0);
    ++complete;
    const int pid = e["pid"], tid = e["tid"];
    pids.insert(pid);
    const double ts = e["ts"];
    auto [it, fresh] = last_ts.emplace(std::pair(pid, tid), ts);
    REQUIRE(ts >= it->second);  // monotone per thread
    it->second = ts;
    if (pid == 1) {
      virtual_end = std::max<Picos>(virtual_end, e["args"]["end_ps"].get<Picos>());
      CHECK(e["args"]["start_ps"].get<Picos>() == std::llround(ts * 1e6));
    }
  }
  CHECK(pids == std::set<int>{1, 2});
  CHECK(complete == 2 * static_cast<int>(timeline.size()));
  CHECK(virtual_end == run.emulation.virtual_time);
}
