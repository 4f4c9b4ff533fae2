#include "algorithms/comm_graph.hpp"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <map>

#include "common/error.hpp"

namespace copse {

namespace {

// Which part (of `parts` equal ones, BlockPartition(count, parts)) holds
// element `offset`, and its partition into `blocks`.
struct Parts {
  BlockPartition whole;
  int blocks;
  Parts(std::uint64_t count, int parts, int blocks_) : whole(count, parts), blocks(blocks_) {}
  int part_of(std::uint64_t offset) const {
    for (int j = 0; j < whole.blocks; ++j)
      if (offset < whole.offset(j) + whole.size(j)) return j;
    return whole.blocks - 1;
  }
  // The block of part `part` that a transfer of [offset, offset + count) is, or -1.
  long block_of(int part, std::uint64_t offset, std::uint64_t count) const {
    const BlockPartition b(whole.size(part), blocks, whole.offset(part));
    for (long j = 0; j < b.blocks; ++j)
      if (b.offset(j) == offset) return b.size(j) == count ? j : -1;
    return -1;
  }
};

}  // namespace

CommGraph communication_graph(const SchedulePlan& plan, const Shape& shape, int parts) {
  CommGraph graph;
  graph.ranks = shape.ranks;
  graph.parts = std::max(parts, 1);
  const Parts split(std::max<std::uint64_t>(shape.count, 1), graph.parts, std::max(shape.blocks, 1));
  std::map<std::array<int, 3>, CommEdge> edges;
  for (int r = 0; r < shape.ranks; ++r) {
    RankSchedule schedule = plan(r);
    for (std::uint64_t step = 0; schedule.next(); ++step) {
      const Transfer& t = schedule.value().send;
      if (!t) continue;
      if (t.peer >= shape.ranks || t.peer == r)
        throw ScheduleError("rank " + std::to_string(r) + " step " + std::to_string(step) + " sends to rank " +
                            std::to_string(t.peer) + ", which is " + (t.peer == r ? "itself" : "not a rank"));
      const int part = split.part_of(t.offset);
      CommEdge& e = edges[{r, t.peer, part}];
      e.from = r, e.to = t.peer, e.part = part;
      e.steps.push_back(step);
      e.blocks.push_back(split.block_of(part, t.offset, t.count));
      e.elements += t.count;
    }
  }
  for (auto& [key, e] : edges) graph.edges.push_back(std::move(e));
  return graph;
}

std::string ranges_text(const std::vector<long>& values) {
  std::vector<long> v = values;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

namespace {

constexpr std::array<const char*, 6> kPartColour = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

std::string edge_label(const CommEdge& e) {
  std::vector<long> steps(e.steps.begin(), e.steps.end());
  std::string label = "s" + ranges_text(steps);
  const bool whole_blocks = std::none_of(e.blocks.begin(), e.blocks.end(), [](long b) { return b < 0; });
  if (whole_blocks && std::any_of(e.blocks.begin(), e.blocks.end(), [](long b) { return b > 0; }))
    label += " b" + ranges_text(e.blocks);
  return label;
}

}  // namespace

void write_dot(std::ostream& out, const CommGraph& graph, const DotOptions& options) {
  const int p = graph.ranks;
  // Pairs per part: {a < b} -> the edges a->b and b->a (either may be absent).
  struct Pair {
    const CommEdge* forward = nullptr;   // lower -> higher rank
    const CommEdge* backward = nullptr;  // higher -> lower rank
  };
  std::vector<std::map<std::pair<int, int>, Pair>> pairs(static_cast<std::size_t>(graph.parts));
  for (const CommEdge& e : graph.edges) {
    Pair& pair = pairs[static_cast<std::size_t>(e.part)][{std::min(e.from, e.to), std::max(e.from, e.to)}];
    (e.from < e.to ? pair.forward : pair.backward) = &e;
  }

  out << "digraph copse {\n";
  if (!options.title.empty()) out << "  label=\"" << options.title << "\";\n  labelloc=t;\n";
  out << "  node [shape=circle, fontname=\"sans-serif\"];\n  edge [fontname=\"sans-serif\", fontsize=10];\n";
  // Ranks, boxed by node.
  std::map<int, std::vector<int>> by_node;
  for (int r = 0; r < p; ++r)
    by_node[static_cast<int>(options.node_of.size()) > r ? options.node_of[static_cast<std::size_t>(r)] : -1].push_back(
        r);
  for (const auto& [node, members] : by_node) {
    const bool boxed = node >= 0;
    if (boxed) out << "  subgraph cluster_node" << node << " {\n    label=\"node " << node << "\";\n    color=gray;\n";
    for (int r : members)
      out << (boxed ? "    " : "  ") << r << " [label=\"" << r << "\""
          << (r == options.root ? ", shape=doublecircle" : "") << "];\n";
    if (boxed) out << "  }\n";
  }

  for (std::size_t part = 0; part < pairs.size(); ++part) {
    // The rank this part's data converge on: the root, or the rank most pairs' first messages flow into.
    int sink = options.root;
    if (sink < 0 || sink >= p) {
      std::vector<int> into(static_cast<std::size_t>(std::max(p, 1)), 0);
      for (const auto& [ranks, pair] : pairs[part]) {
        const CommEdge* first = pair.forward;
        if (!first || (pair.backward && pair.backward->steps.front() < first->steps.front())) first = pair.backward;
        ++into[static_cast<std::size_t>(first->to)];
      }
      sink = static_cast<int>(std::max_element(into.begin(), into.end()) - into.begin());
    }
    // Depth from the sink over this part's edges, either way.
    std::vector<std::vector<int>> adjacent(static_cast<std::size_t>(p));
    for (const auto& [ranks, pair] : pairs[part]) {
      adjacent[static_cast<std::size_t>(ranks.first)].push_back(ranks.second);
      adjacent[static_cast<std::size_t>(ranks.second)].push_back(ranks.first);
    }
    std::vector<int> depth(static_cast<std::size_t>(p), std::numeric_limits<int>::max());
    std::deque<int> queue;
    if (sink >= 0 && sink < p) depth[static_cast<std::size_t>(sink)] = 0, queue.push_back(sink);
    while (!queue.empty()) {
      const int r = queue.front();
      queue.pop_front();
      for (int q : adjacent[static_cast<std::size_t>(r)])
        if (depth[static_cast<std::size_t>(q)] == std::numeric_limits<int>::max())
          depth[static_cast<std::size_t>(q)] = depth[static_cast<std::size_t>(r)] + 1, queue.push_back(q);
    }
    const char* colour = graph.parts > 1 ? kPartColour[part % kPartColour.size()] : "black";
    for (const auto& [ranks, pair] : pairs[part]) {
      auto [a, b] = ranks;
      const CommEdge* down = pair.forward;  // a -> b
      const CommEdge* up = pair.backward;   // b -> a
      if (depth[static_cast<std::size_t>(b)] < depth[static_cast<std::size_t>(a)]) std::swap(a, b), std::swap(down, up);
      // Drawn a -> b, a nearer the sink.
      std::string label;
      const char* dir = "forward";
      if (down && up) {
        dir = "both";
        const std::string l_down = edge_label(*down), l_up = edge_label(*up);
        label = l_down == l_up ? l_down
                               : std::to_string(b) + "->" + std::to_string(a) + " " + l_up + "\\n" + std::to_string(a) +
                                     "->" + std::to_string(b) + " " + l_down;
      } else if (up) {
        dir = "back";
        label = edge_label(*up);
      } else {
        label = edge_label(*down);
      }
      out << "  " << a << " -> " << b << " [dir=" << dir << ", color=\"" << colour << "\", fontcolor=\"" << colour
          << "\", label=\"" << label << "\"";
      if (graph.parts > 1) out << ", tooltip=\"part " << part + 1 << " of " << graph.parts << "\"";
      out << "];\n";
    }
  }
  if (graph.parts > 1) {
    out << "  subgraph cluster_legend {\n    label=\"vector parts\";\n    color=white;\n";
    for (int part = 0; part < graph.parts; ++part)
      out << "    legend" << part << " [shape=box, label=\"part " << part + 1 << " of " << graph.parts << "\", color=\""
          << kPartColour[static_cast<std::size_t>(part) % kPartColour.size()] << "\", fontcolor=\""
          << kPartColour[static_cast<std::size_t>(part) % kPartColour.size()] << "\"];\n";
    out << "  }\n";
  }
  out << "}\n";
}

}  // namespace copse
