#include "common/rank_map.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "common/error.hpp"

namespace copse {

namespace {
std::size_t at(int rank) { return static_cast<std::size_t>(rank); }
}  // namespace

RankMap RankMap::uniform(int ranks, int ranks_per_node) {
  if (ranks < 1) throw UsageError("a rank map needs at least one rank, got " + std::to_string(ranks));
  if (ranks_per_node < 0)
    throw UsageError("ranks per node must not be negative, got " + std::to_string(ranks_per_node));
  RankMap map;
  map.ranks_ = ranks;
  map.ranks_per_node_ = ranks_per_node;
  map.nodes_ = ranks_per_node == 0 ? ranks : (ranks + ranks_per_node - 1) / ranks_per_node;
  return map;
}

RankMap RankMap::from_node_sizes(std::span<const int> sizes) {
  if (sizes.empty()) throw UsageError("a rank map needs at least one node");
  std::vector<int> node_of;
  for (std::size_t n = 0; n < sizes.size(); ++n) {
    if (sizes[n] < 1) throw UsageError("node " + std::to_string(n) + " holds no ranks");
    node_of.insert(node_of.end(), static_cast<std::size_t>(sizes[n]), static_cast<int>(n));
  }
  // Even nodes need no table.
  const bool even = std::all_of(sizes.begin(), sizes.end(), [&](int k) { return k == sizes.front(); });
  if (even) return uniform(static_cast<int>(node_of.size()), sizes.front());
  return from_nodes(node_of);
}

RankMap RankMap::from_nodes(std::span<const int> node_of) {
  if (node_of.empty()) throw UsageError("a rank map needs at least one rank");
  RankMap map = uniform(static_cast<int>(node_of.size()), 1);
  std::map<int, int> renumbered;
  map.node_of_.reserve(node_of.size());
  for (int n : node_of) {
    const auto [it, added] = renumbered.emplace(n, static_cast<int>(renumbered.size()));
    map.node_of_.push_back(it->second);
  }
  map.nodes_ = static_cast<int>(renumbered.size());
  return map;
}

RankMap RankMap::from_places(std::vector<Place> places) {
  std::vector<int> nodes;
  for (const Place& p : places) nodes.push_back(p.node);
  RankMap map = from_nodes(nodes);
  std::map<int, std::pair<int, int>> process_home;  // process -> (node, mpi rank)
  std::set<std::pair<int, int>> slots;
  for (std::size_t r = 0; r < places.size(); ++r) {
    const Place& p = places[r];
    const int node = map.node_of_[r];
    if (!slots.emplace(p.process, p.thread).second)
      throw UsageError("rank map: two ranks are thread " + std::to_string(p.thread) + " of process " +
                       std::to_string(p.process));
    const auto [it, added] = process_home.emplace(p.process, std::make_pair(node, p.mpi_rank));
    if (!added && it->second.first != node)
      throw UsageError("rank map: process " + std::to_string(p.process) + " spans two nodes");
    if (!added && it->second.second != p.mpi_rank)
      throw UsageError("rank map: process " + std::to_string(p.process) + " has two MPI ranks");
    map.process_of_.push_back(p.process);
    map.thread_of_.push_back(p.thread);
    map.mpi_rank_of_.push_back(p.mpi_rank);
  }
  return map;
}

int RankMap::node(int rank) const {
  if (!node_of_.empty()) return node_of_[at(rank)];
  return ranks_per_node_ == 0 ? rank : rank / ranks_per_node_;
}

int RankMap::process(int rank) const { return process_of_.empty() ? 0 : process_of_[at(rank)]; }
int RankMap::thread(int rank) const { return thread_of_.empty() ? rank : thread_of_[at(rank)]; }
int RankMap::mpi_rank(int rank) const { return mpi_rank_of_.empty() ? -1 : mpi_rank_of_[at(rank)]; }

std::vector<int> RankMap::node_sizes() const {
  std::vector<int> sizes(static_cast<std::size_t>(nodes_), 0);
  for (int r = 0; r < ranks_; ++r) ++sizes[static_cast<std::size_t>(node(r))];
  return sizes;
}

std::vector<int> RankMap::node_table() const {
  std::vector<int> table(at(ranks_));
  for (int r = 0; r < ranks_; ++r) table[at(r)] = node(r);
  return table;
}

std::string RankMap::describe(int rank) const {
  std::string text = "rank " + std::to_string(rank);
  if (nodes_ > 1) text += " (node " + std::to_string(node(rank)) + ")";
  return text;
}

}  // namespace copse
