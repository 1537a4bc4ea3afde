// fuse-elementwise: groups element-wise ops, casts, broadcasts and reductions (Softmax, LogSoftmax,
// LayerNormalization, Reduce* over one block of axes) into FusedKernel nodes, each computed by one generated kernel
// in as few passes over memory as its reductions allow (src/codegen).
//
// A group shares one iteration space: every member's output has the group's full shape, except reductions, whose
// results hold one value per row, and element-wise work on such per-row values (the variance's `+ eps` and square
// root in a LayerNorm written out op by op), which joins a group with reductions and runs once per row. Nodes join
// the group of one of their producers in topological order; each node is in at most one group, so no work is
// duplicated. A node joins only when all its other inputs are defined before the group's first node: the
// FusedKernel takes that node's place, so the graph stays acyclic and in order.
//
// A Transpose of a value from outside that keeps the innermost dim starts a group: the kernel reads that value
// through permuted strides, so the permuted copy is never written (a head split or merge before an element-wise
// op). A Transpose nothing joins stays as it is. LRN starts a group too: its window reads neighbouring channels
// of its input from memory.
//
// A group weighs at most kMaxGroupWeight (compile_weight: 1 per op, 8 per op whose code is a polynomial or a call,
// such as tanh); a longer chain continues in the next group (kernel). LLVM's time on one kernel grows faster than
// its length (a 50,000-op chain compiled for minutes, 256 Tanh 16 s, 32 Tanh 0.7 s), while one more pass over
// memory per few dozen such ops costs little; equal pieces of a long chain also compile once.
//
// Runs last in the pipeline: convolutions and matrix products have already taken their epilogues as oneDNN
// post-ops, and layouts are fixed (a group works on the shapes the IR states).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

constexpr int kMaxGroupWeight = 256;

struct Group {
  std::vector<Node*> nodes;
  int weight = 0;  // the members' compile_weight
  Shape space;
  ReducedBlock red;  // the reduced dims (count 0: element-wise only)
  size_t first = 0;  // index of the first member in the graph

  // Whether a node over `s` reducing `r` fits: the same space and reduced block, or element-wise work on values
  // of one per row (the space with the reduced dims at 1).
  bool fits(const Shape& s, const ReducedBlock& r) const {
    if (s == space) return r.count == 0 || red.count == 0 || r == red;
    if (r.count > 0 || red.count == 0 || red.kind != ReducedBlock::Kind::reduce || !space.rank_known() ||
        !s.rank_known() || s.rank() != space.rank())
      return false;
    size_t hi = space.rank() - size_t(red.after), lo = hi - size_t(red.count);
    for (size_t d = 0; d < space.rank(); ++d)
      if (!(d >= lo && d < hi ? s.dims()[d] == Dim(1) : s.dims()[d] == space.dims()[d])) return false;
    return true;
  }
};

// A scalar constant the body can hold itself (compiled into the kernel as an immediate). Reductions' axes
// also stay constants in the body (the kernel's shape depends on them).
bool inline_constant(const FusionFacts& facts, const Value* v) {
  return v->is_constant() && v->constant().numel() == 1 && facts.storable(v->dtype());
}

// Shape arithmetic: an integer result of a few elements (a dim, a Reshape target). Shape inference follows such
// values symbolically (Reshape(x, Concat(Shape(x)[0], 4*Shape(x)[1], 64)) types as [seq, 4*batch, 64]) and a
// FusedKernel would hide them behind its body, leaving later shapes unknown until run time; a kernel for a
// handful of elements would gain nothing anyway.
bool is_shape_arithmetic(const Node& n) {
  for (const Value* v : n.outputs()) {
    if (!is_integer(v->dtype()) || !v->shape().is_static()) return false;
    if (shape_numel(v->shape().static_dims()) > 8) return false;
  }
  return true;
}

// The shape a node iterates over (its input for reductions), or nullopt when the node cannot take part.
std::optional<std::pair<Shape, ReducedBlock>> node_space(const FusionFacts& facts, const Node& n) {
  if (!facts.can_generate(n) || is_shape_arithmetic(n)) return std::nullopt;
  // (A Transpose that moves the innermost dim would be read as gathered vectors: its own kernel is faster.)
  if (facts.gathers(n)) return std::nullopt;
  std::optional<ReducedBlock> red = facts.reduced_block(n);
  if (!red) return std::nullopt;
  const Shape& s = red->count > 0 ? n.input(0)->shape() : n.output(0)->shape();
  if (!s.rank_known()) return std::nullopt;
  return std::make_pair(s, *red);
}

// Whether input i of n is read from memory in the kernel (a Transpose's input, LRN's window): such a node starts
// a group and never reads a member's result.
bool reads_memory(const FusionFacts& facts, const Node& n, size_t i) {
  InputRole r = facts.input_role(n, i);
  return r == InputRole::permuted || r == InputRole::window;
}

// Whether some output of n holds K values per row (TopK's): no element of a kernel's space, so nothing in its
// kernel reads them.
bool has_entries(const FusionFacts& facts, const Node& n) {
  for (size_t o = 0; o < n.num_outputs(); ++o)
    if (facts.output_role(n, o) == OutputRole::entries) return true;
  return false;
}

// Groups, state and graph positions while find_groups walks the graph.
struct Grouping {
  const FusionFacts& facts;
  Graph& g;
  std::unordered_map<const Node*, size_t> index;     // node -> position in the graph
  std::unordered_map<const Node*, size_t> group_of;  // member -> its group
  std::vector<Group> groups;

  // The groups of n's producers that n fits, in input order, each once.
  std::vector<size_t> candidates(const std::vector<Value*>& producers, const Shape& space,
                                 const ReducedBlock& red, int weight) const {
    std::vector<size_t> cand;
    for (const Value* v : producers) {
      if (!v || !v->producer()) continue;
      auto it = group_of.find(v->producer());
      if (it == group_of.end() || std::find(cand.begin(), cand.end(), it->second) != cand.end()) continue;
      if (groups[it->second].weight + weight > kMaxGroupWeight) continue;  // full: n starts the next group
      if (groups[it->second].fits(space, red)) cand.push_back(it->second);
    }
    return cand;
  }

  // Whether n and the groups `cand` (each fitting n) can be one group. Several groups need one space and at most
  // one reduced block. The group's FusedKernel takes the place of its earliest member, so every value n and the
  // members read from outside must be defined before that (which also rules out an outside node between the
  // groups that reads one and feeds another); a Transpose member must not read a member. (One group's own
  // members were checked against its first node when they joined.)
  bool can_join(const Node& n, const Shape& space, const ReducedBlock& red,
                const std::vector<size_t>& cand) const {
    ReducedBlock r = red;
    size_t first = groups[cand[0]].first;
    for (size_t c : cand) {
      const Group& grp = groups[c];
      first = std::min(first, grp.first);
      if (cand.size() == 1) break;
      if (grp.space != space) return false;
      if (grp.red.count > 0) {
        if (r.count > 0 && !(r == grp.red)) return false;
        r = grp.red;
      }
    }
    auto member = [&](const Node* p) {
      auto it = group_of.find(p);
      return it != group_of.end() && std::find(cand.begin(), cand.end(), it->second) != cand.end();
    };
    auto inputs_ready = [&](const Node& m) {
      for (size_t j = 0; j < m.num_inputs(); ++j) {
        const Value* u = m.input(j);
        if (!u || !u->producer() || u->graph() != &g) continue;
        if (member(u->producer())) {
          // A Transpose reads a kernel input, as do LRN (its window reads neighbouring channels from memory),
          // an integer division its divisor (checked for zeros), per-channel parameters and a loss's targets
          // (must_be_kernel_input). TopK's results hold K values per row, no element of the kernel's space:
          // nothing in its kernel reads them.
          if (must_be_kernel_input(facts.input_role(m, j)) || has_entries(facts, *u->producer())) return false;
        } else if (index.at(u->producer()) >= first) {
          return false;
        }
      }
      return true;
    };
    if (!inputs_ready(n)) return false;
    if (cand.size() > 1)
      for (size_t c : cand)
        for (const Node* m : groups[c].nodes)
          if (!inputs_ready(*m)) return false;
    return true;
  }

  // Moves the groups `cand` into the earliest of them, members in graph order (the body is built in that
  // order); the others are left empty. Returns the merged group.
  size_t merge(const std::vector<size_t>& cand) {
    size_t into = cand[0];
    for (size_t c : cand)
      if (groups[c].first < groups[into].first) into = c;
    Group& target = groups[into];
    for (size_t c : cand) {
      if (c == into) continue;
      for (Node* m : groups[c].nodes) {
        target.nodes.push_back(m);
        group_of[m] = into;
      }
      if (groups[c].red.count > 0) target.red = groups[c].red;
      target.weight += groups[c].weight;
      groups[c].weight = 0;
      groups[c].nodes.clear();
    }
    std::sort(target.nodes.begin(), target.nodes.end(),
              [&](const Node* x, const Node* y) { return index.at(x) < index.at(y); });
    return into;
  }
};

std::vector<Group> find_groups(const FusionFacts& facts, Graph& g) {
  static const std::vector<Value*> kNone;
  Grouping gr{facts, g, {}, {}, {}};
  for (size_t i = 0; i < g.nodes().size(); ++i) gr.index[g.nodes()[i].get()] = i;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    Node* n = g.nodes()[i].get();
    auto sp = node_space(facts, *n);
    if (!sp) continue;
    auto& [space, red] = *sp;
    // A Transpose is a strided read of a kernel input, LRN's window a read of neighbouring channels: each starts
    // a group, never reads a member's result.
    bool reads_input = n->num_inputs() > 0 && reads_memory(facts, *n, 0);
    int weight = facts.compile_weight(*n);
    std::vector<size_t> cand = gr.candidates(reads_input ? kNone : n->inputs(), space, red, weight);
    // Producers in several groups (a Where of three branches): all of them and n become one group if they can;
    // else n joins the first of them it can.
    std::optional<size_t> joined;
    int merged_weight = weight;
    for (size_t c : cand) merged_weight += gr.groups[c].weight;
    if (cand.size() > 1 && merged_weight <= kMaxGroupWeight && gr.can_join(*n, space, red, cand))
      joined = gr.merge(cand);
    for (size_t c : cand)
      if (!joined && gr.can_join(*n, space, red, {c})) joined = c;
    if (!joined) {
      gr.groups.push_back({{}, 0, space, {}, i});
      joined = gr.groups.size() - 1;
    }
    Group& grp = gr.groups[*joined];
    grp.nodes.push_back(n);
    grp.weight += weight;
    if (red.count > 0) grp.red = red;
    gr.group_of[n] = *joined;
  }
  return std::move(gr.groups);
}

// Who reads each value of the graph being fused, kept current while groups are outlined (a FusedKernel made
// for a later group reads what its members read), so that a group's results are redirected to its FusedKernel by
// visiting their readers rather than every node of the graph.
struct Readers {
  const rewrite::UseMap& uses;  // as before fusion: graph outputs and values read in regions (pinned)
  std::unordered_map<const Value*, std::vector<Node*>> extra;  // readers added since: FusedKernels

  bool pinned(const Value* v) const { return uses.pinned(v); }
  template <class F>
  void each(const Value* v, F f) const {
    for (Node* u : uses.users(v)) f(u);
    if (auto it = extra.find(v); it != extra.end())
      for (Node* u : it->second) f(u);
  }
  // Every use of `from` (a value of g) now reads `to`, which takes over from's readers.
  void replace(Graph& g, Value* from, Value* to) {
    if (pinned(from)) {  // a graph output or read inside a region: the full walk
      g.replace_all_uses(from, to);
      return;
    }
    std::vector<Node*>& moved = extra[to];
    each(from, [&](Node* u) {
      for (size_t i = 0; i < u->num_inputs(); ++i)
        if (u->input(i) == from) u->set_input(i, to);
      moved.push_back(u);
    });
  }
};

// Outlines one group into a FusedKernel placed at the group's first node; returns the members to erase (none
// when no member's result is read outside the group).
std::vector<Node*> outline(const FusionFacts& facts, Graph& g, const Group& grp, Readers& readers, int id,
                           std::unordered_set<std::string>& taken) {
  std::unordered_set<const Node*> members(grp.nodes.begin(), grp.nodes.end());
  auto read_outside = [&](const Value* v) {
    if (readers.pinned(v)) return true;
    bool outside = false;
    readers.each(v, [&](const Node* u) { outside = outside || !members.count(u); });
    return outside;
  };
  std::vector<Value*> outs;
  for (Node* n : grp.nodes)
    for (Value* v : n->outputs())
      if (read_outside(v)) outs.push_back(v);
  if (outs.empty()) return {};

  auto body = std::make_shared<Graph>("kernel" + std::to_string(id));
  body->set_parent(&g);
  std::unordered_map<const Value*, Value*> inner;  // outer value -> body value
  std::vector<Value*> node_inputs;
  // Names stay unique across all regions (the text format requires it): the suffix carries the kernel's number.
  // (Kernels are numbered per graph, so `taken`, every name of the whole tree, keeps two regions' kernels apart.)
  auto body_name = [&](const Value* v) {
    std::string base = v->name() + "_k" + std::to_string(id), name = body->unique_name(base);
    for (int k = 1; taken.count(name); ++k) name = body->unique_name(base + "_" + std::to_string(k));
    taken.insert(name);
    return name;
  };
  for (Node* n : grp.nodes)
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      Value* v = n->input(i);
      if (!v || inner.count(v) || (v->producer() && members.count(v->producer()))) continue;
      bool axes = facts.input_role(*n, i) == InputRole::axes && v->is_constant();
      if (axes || inline_constant(facts, v)) {
        inner[v] = body->add_constant(body_name(v), v->constant());
      } else {
        inner[v] = body->add_input(body_name(v), v->type());
        node_inputs.push_back(v);
      }
    }
  for (Node* n : grp.nodes) {
    std::vector<Value*> ins;
    for (Value* v : n->inputs()) ins.push_back(v ? inner.at(v) : nullptr);
    std::vector<std::string> names;
    for (Value* v : n->outputs()) names.push_back(body_name(v));
    Node* m = body->add_node(n->op(), ins, names, n->attrs(), n->loc());
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      m->output(k)->set_type(n->output(k)->type());
      inner[n->output(k)] = m->output(k);
    }
  }
  std::vector<Value*> body_outs;
  std::vector<std::string> out_names;
  for (Value* v : outs) {
    body_outs.push_back(inner.at(v));
    out_names.push_back(rewrite::free_name(g, v));
  }
  body->set_outputs(body_outs);
  AttrMap attrs;
  attrs["body"] = Attribute(GraphPtr(body));
  Node* fused = g.insert_node(grp.first, OpKind::FusedKernel, node_inputs, out_names, attrs, grp.nodes.front()->loc());
  for (Value* v : node_inputs) readers.extra[v].push_back(fused);
  for (size_t k = 0; k < outs.size(); ++k) {
    fused->output(k)->set_type(outs[k]->type());
    readers.replace(g, outs[k], fused->output(k));
  }
  return grp.nodes;
}

bool fuse(const FusionFacts& facts, Graph& g, std::unordered_set<std::string>& taken) {
  std::vector<Group> groups = find_groups(facts, g);
  if (groups.empty()) return false;
  rewrite::UseMap uses(g);
  Readers readers{uses, {}};
  std::vector<Node*> dead;
  std::erase_if(groups, [](const Group& grp) { return grp.nodes.empty(); });  // merged into others
  // From the last group back, so inserting a node does not move the positions of the groups still to come.
  for (size_t i = groups.size(); i-- > 0;) {
    // A Transpose that nothing joined stays a Transpose: the blocked CPU transpose beats strided vector reads.
    const Node& first = *groups[i].nodes[0];
    bool lone_view = groups[i].nodes.size() == 1 && first.num_inputs() > 0 &&
                     facts.input_role(first, 0) == InputRole::permuted;
    if (lone_view) continue;
    std::vector<Node*> gone = outline(facts, g, groups[i], readers, int(i), taken);
    dead.insert(dead.end(), gone.begin(), gone.end());
  }
  g.erase_nodes(dead);
  return !dead.empty();
}

}  // namespace

bool FuseElementwisePass::run(Graph& g, PassContext& ctx) {
  // Every value name of the tree, FusedKernel bodies included (an explicit stack, no recursion).
  std::unordered_set<std::string> taken;
  std::vector<const Graph*> pending{&g};
  while (!pending.empty()) {
    const Graph& sub = *pending.back();
    pending.pop_back();
    for (const Value* v : sub.inputs()) taken.insert(v->name());
    for (const Value* v : sub.constants()) taken.insert(v->name());
    for (auto& n : sub.nodes()) {
      for (const Value* v : n->outputs()) taken.insert(v->name());
      for (const Graph* r : n->regions()) pending.push_back(r);
    }
  }
  return rewrite::for_each_graph_postorder(g, [&](Graph& sub) { return fuse(*ctx.fusion, sub, taken); });
}

}  // namespace cuvil
