#include "kernels/ref/ref_interpreter.h"

#include <unordered_map>

#include "ir/op_schema.h"
#include "ir/verifier.h"
#include "kernels/ref/ref_kernels.h"

namespace cuvil {

namespace {

// The values computed so far in one graph, and the frame of the graph enclosing it (outer-scope references).
struct Frame {
  const Frame* outer = nullptr;
  std::unordered_map<const Value*, Tensor> values;

  const Tensor* find(const Value* v) const {
    for (const Frame* f = this; f; f = f->outer) {
      auto it = f->values.find(v);
      if (it != f->values.end()) return &it->second;
    }
    return v->is_constant() ? &v->constant() : nullptr;
  }
};

class Interpreter final : public RegionRunner {
 public:
  explicit Interpreter(const Frame* outer, int depth) : outer_(outer), depth_(depth) {}

  std::vector<Tensor> run_graph(const Graph& g, const std::vector<Tensor>& inputs) {
    CUVIL_CHECK(inputs.size() == g.inputs().size(), "graph '", g.name(), "' takes ", g.inputs().size(),
                " inputs, given ", inputs.size());
    Frame frame{outer_, {}};
    for (size_t i = 0; i < inputs.size(); ++i) frame.values[g.inputs()[i]] = inputs[i];
    for (const auto& node : g.nodes()) {
      const Node& n = *node;
      std::vector<const Tensor*> ins;
      for (const Value* v : n.inputs()) {
        const Tensor* t = v ? frame.find(v) : nullptr;
        CUVIL_ASSERT(!v || t, n.describe(), ": input '", v ? v->name() : "", "' has no value");
        ins.push_back(t);
      }
      std::vector<Tensor> outs = run_node(n, ins, &frame);
      for (size_t k = 0; k < outs.size(); ++k) frame.values[n.output(k)] = std::move(outs[k]);
    }
    std::vector<Tensor> results;
    for (const Value* v : g.outputs()) {
      const Tensor* t = frame.find(v);
      CUVIL_ASSERT(t, "graph \'", g.name(), "\': output '", v->name(), "' has no value");
      results.push_back(*t);
    }
    return results;
  }

  std::vector<Tensor> run_node(const Node& n, const std::vector<const Tensor*>& ins, const Frame* frame) {
    // Outputs inference can size are allocated here; the kernel allocates the others (data-dependent sizes).
    std::vector<TensorType> types(ins.size());
    std::vector<const TensorType*> type_ptrs(ins.size(), nullptr);
    for (size_t k = 0; k < ins.size(); ++k)
      if (ins[k]) {
        types[k] = TensorType{ins[k]->dtype(), Shape::of(ins[k]->shape())};
        type_ptrs[k] = &types[k];
      }
    int64_t fresh = 0;
    InferContext infer(n, type_ptrs, ins, {}, &fresh);
    op_schema(n.op()).infer(infer);
    std::vector<Tensor> outs(n.num_outputs());
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!infer.output_set(k)) continue;
      const TensorType& t = infer.output_types()[k];
      if (t.shape.is_static()) outs[k] = Tensor::zeros(n.output(k)->dtype(), t.shape.static_dims());
    }
    Interpreter regions(frame, depth_);
    KernelContext ctx(n, ins, &outs, &regions);
    ref_kernel(n.op())(ctx);
    // a string output may point at its inputs' text, which the caller may free (Tensor::strings)
    for (Tensor& t : outs)
      if (t.defined() && t.dtype() == DType::str) t = t.with_own_strings();
    return outs;
  }

  void run_region(const Graph& region, const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs,
                  size_t borrowed) override {
    CUVIL_CHECK(depth_ < kMaxRegionDepth, "region '", region.name(), "' runs inside ", depth_,
                " other regions, more than the limit of ", kMaxRegionDepth);
    Interpreter inner(outer_, depth_ + 1);
    outputs = inner.run_graph(region, inputs);
  }

 private:
  const Frame* outer_;
  int depth_;
};

}  // namespace

std::vector<Tensor> run_reference(const Graph& g, const std::vector<Tensor>& inputs) {
  return Interpreter(nullptr, 0).run_graph(g, inputs);
}

std::vector<Tensor> run_reference_node(const Node& n, const std::vector<const Tensor*>& inputs) {
  Frame none;
  return Interpreter(nullptr, 0).run_node(n, inputs, &none);
}

}  // namespace cuvil
