#include "frontend/onnx/graph_order.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>

#include "support/error.h"

namespace cuvil {

namespace {

std::string node_label(const onnx::NodeProto& n, int index) {
  std::string name = !n.name().empty() ? n.name() : (n.output_size() ? n.output(0) : "");
  return n.op_type() + " '" + name + "' (node " + std::to_string(index) + ")";
}

// Every value name a subgraph reads, at any depth (its own values included: only those that a node of the
// enclosing graph produces are kept by the caller). An explicit stack: nesting depth is bounded elsewhere, but
// this walk runs before that check.
void names_read_by(const onnx::GraphProto& sub, std::vector<const std::string*>& out) {
  std::vector<const onnx::GraphProto*> pending{&sub};
  while (!pending.empty()) {
    const onnx::GraphProto& g = *pending.back();
    pending.pop_back();
    for (const auto& n : g.node()) {
      for (const auto& in : n.input()) out.push_back(&in);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) pending.push_back(&a.g());
        for (const auto& sg : a.graphs()) pending.push_back(&sg);
      }
    }
    for (const auto& o : g.output()) out.push_back(&o.name());
  }
}

}  // namespace

std::vector<int> onnx_node_order(const onnx::GraphProto& g) {
  const int n = g.node_size();
  std::unordered_map<std::string, int> producer;
  producer.reserve(size_t(n) * 2);
  for (int i = 0; i < n; ++i)
    for (const auto& out : g.node(i).output()) {
      if (out.empty()) continue;
      auto [it, fresh] = producer.emplace(out, i);
      CUVIL_CHECK(fresh, "graph '", g.name(), "': value '", out, "' is produced by two nodes, ",
                  node_label(g.node(it->second), it->second), " and ", node_label(g.node(i), i));
    }
  // deps[i]: the nodes i reads from; users[j]: the nodes that read j.
  std::vector<std::vector<int>> deps(static_cast<size_t>(n)), users(static_cast<size_t>(n));
  std::vector<const std::string*> names;
  for (int i = 0; i < n; ++i) {
    const auto& node = g.node(i);
    names.clear();
    for (const auto& in : node.input()) names.push_back(&in);
    for (const auto& a : node.attribute()) {
      if (a.has_g()) names_read_by(a.g(), names);
      for (const auto& sg : a.graphs()) names_read_by(sg, names);
    }
    for (const std::string* name : names) {
      auto it = producer.find(*name);
      if (it == producer.end()) continue;
      int j = it->second;
      if (std::find(deps[size_t(i)].begin(), deps[size_t(i)].end(), j) != deps[size_t(i)].end()) continue;
      deps[size_t(i)].push_back(j);
      users[size_t(j)].push_back(i);
    }
  }
  // Kahn's algorithm, the ready node first in the file first: an already sorted graph keeps its order.
  std::vector<int> waiting(static_cast<size_t>(n));
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    waiting[size_t(i)] = int(deps[size_t(i)].size());
    if (waiting[size_t(i)] == 0) ready.push(i);
  }
  std::vector<int> order;
  order.reserve(size_t(n));
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[size_t(i)])
      if (--waiting[size_t(u)] == 0) ready.push(u);
  }
  if (int(order.size()) == n) return order;
  // A cycle: walk back from a node still waiting through inputs still waiting until a node repeats.
  int start = 0;
  while (waiting[size_t(start)] == 0) ++start;
  std::vector<int> seen_at(static_cast<size_t>(n), -1), path;
  int cur = start;
  while (seen_at[size_t(cur)] < 0) {
    seen_at[size_t(cur)] = int(path.size());
    path.push_back(cur);
    for (int d : deps[size_t(cur)])
      if (waiting[size_t(d)] > 0) {
        cur = d;
        break;
      }
  }
  // path[k] reads path[k + 1], and the last reads `cur`: in data-flow order, cur -> path.back() -> ... -> cur.
  std::string cycle = node_label(g.node(cur), cur);
  for (size_t k = path.size(); k-- > size_t(seen_at[size_t(cur)]) + 1;) cycle += " -> " + node_label(g.node(path[k]), path[k]);
  fail("graph '", g.name(), "' has a cycle: ", cycle, " -> ", node_label(g.node(cur), cur),
       " (each reads the output of the one before it)");
}

}  // namespace cuvil
