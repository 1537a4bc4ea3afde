// compute-half-in-float: float16 convolutions, matrix products, pools, resizes and recurrent layers compute in f32
// between casts, so they run on the fast (f32) kernels instead of the reference ones. A float16 model (such as
// onnxconverter-common writes) keeps f16 storage everywhere else; each op rounds its result to f16 once, which is
// what ONNX Runtime's CPU provider does too (it wraps the f16 ops it lacks kernels for in the same casts).
//
//   y = Conv(x: f16, w: f16 constant, b: f16 constant)
//     ->  y = Cast<f16>(Conv(Cast<f32>(x), w': f32 constant, b': f32 constant))
//
// Constant inputs are converted here, once; the other casts are element-wise and join the generated kernels of
// their neighbours (fuse-elementwise), so a Relu between two float16 convolutions stays one pass over memory.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace cuvil {
namespace {

// The ops rewritten, and which of their inputs are data to convert (the rest: indices, sizes, scales).
bool converts_input(OpKind op, size_t i) {
  switch (op) {
    case OpKind::Conv:
    case OpKind::ConvTranspose:
    case OpKind::MatMul:
    case OpKind::Gemm:
    case OpKind::Einsum:
    case OpKind::AveragePool:
    case OpKind::MaxPool:
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalMaxPool:
    case OpKind::LSTM:
    case OpKind::GRU:
    case OpKind::RNN:
      return true;
    case OpKind::Resize: return i == 0;
    default: return false;
  }
}

Tensor to_f32(const Tensor& t) {
  Tensor r = Tensor::zeros(DType::f32, t.shape());
  const f16_t* src = t.data<f16_t>();
  float* dst = r.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = float(src[i]);
  return r;
}

AttrMap cast_to(DType t) { return {{"to", Attribute(int64_t(dtype_onnx_id(t)))}}; }

bool rewrite_graph(Graph& g) {
  std::vector<Node*> todo;
  for (auto& n : g.nodes()) {
    bool half = false;
    for (size_t i = 0; i < n->num_inputs(); ++i)
      half |= n->input(i) && n->input(i)->dtype() == DType::f16 && converts_input(n->op(), i);
    if (half && n->regions().empty()) todo.push_back(n.get());
  }
  for (Node* n : todo) {
    size_t pos = rewrite::node_index(g, n);
    std::vector<Value*> ins;
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      Value* v = n->input(i);
      if (!v || v->dtype() != DType::f16 || !converts_input(n->op(), i)) {
        ins.push_back(v);
      } else if (v->is_constant()) {
        ins.push_back(g.add_constant(g.unique_name(v->name() + "_f32"), to_f32(v->constant())));
      } else {
        Node* c = g.insert_node(pos++, OpKind::Cast, {v}, {g.unique_name(v->name() + "_f32")}, cast_to(DType::f32),
                                n->loc());
        c->output(0)->set_type({DType::f32, v->shape()});
        ins.push_back(c->output(0));
      }
    }
    std::vector<std::string> names;
    for (Value* o : n->outputs()) names.push_back(g.unique_name(o->name() + "_f32"));
    Node* f = g.insert_node(pos++, n->op(), ins, names, n->attrs(), n->loc());
    for (size_t k = 0; k < n->num_outputs(); ++k) {
      Value* o = n->output(k);
      bool was_half = o->dtype() == DType::f16;
      f->output(k)->set_type({was_half ? DType::f32 : o->dtype(), o->shape()});
      Value* repl = f->output(k);
      if (was_half) {
        Node* back = g.insert_node(pos++, OpKind::Cast, {repl}, {g.unique_name(o->name() + "_f16")},
                                   cast_to(DType::f16), n->loc());
        back->output(0)->set_type(o->type());
        repl = back->output(0);
      }
      rewrite::replace_value(g, o, repl);
    }
    g.erase_nodes({n});
  }
  return !todo.empty();
}

}  // namespace

bool ComputeHalfInFloatPass::run(Graph& g, PassContext&) {
  return rewrite::for_each_graph_postorder(g, rewrite_graph);
}

}  // namespace cuvil
