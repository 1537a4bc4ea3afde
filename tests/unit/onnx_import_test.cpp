// The ONNX importer on well-formed and bad models, and the executor's input validation.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx/onnx_importer.h"
#include "runtime/executor.h"
#include "onnx_test_util.h"
#include "test_util.h"

using namespace cuvil;
using namespace cuvil::test;

namespace {

// Like set_type, with each dim a number or a symbol name.
void set_symbolic_type(onnx::ValueInfoProto* v, const std::string& name, int elem, std::vector<std::string> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (auto& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
    else if (!d.empty()) dim->set_dim_param(d);
  }
}

// y = Relu(x) + w, x: f32[batch, 3], w an initializer.
onnx::ModelProto relu_add_model() {
  onnx::ModelProto m = onnx_model(8, 13);
  auto* g = m.mutable_graph();
  set_symbolic_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"batch", "3"});
  set_symbolic_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {"batch", "3"});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  for (float f : {1.f, 2.f, 3.f}) w->add_float_data(f);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu_1");
  relu->add_input("x");
  relu->add_output("r");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add_1");
  add->add_input("r");
  add->add_input("w");
  add->add_output("y");
  return m;
}

}  // namespace

TEST(OnnxImport, ImportsAndRunsWithSymbolicBatch) {
  auto g = import(relu_add_model());
  ASSERT_EQ(g->inputs().size(), 1u);
  EXPECT_EQ(g->inputs()[0]->type().str(), "f32[batch, 3]");
  EXPECT_EQ(g->outputs()[0]->type().str(), "f32[batch, 3]");
  EXPECT_EQ(g->nodes()[0]->loc().name, "relu_1");
  Executor exec(g);
  for (int64_t batch : {1, 4, 0}) {
    Tensor x = Tensor::zeros(DType::f32, {batch, 3});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 5) - 2;
    auto out = exec.run({x});
    ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{batch, 3}));
    for (int64_t i = 0; i < x.numel(); ++i)
      EXPECT_EQ(out[0].data<float>()[i], std::max(0.f, x.data<float>()[i]) + float(i % 3 + 1));
  }
  EXPECT_EQ(exec.stats().plans_built, 3);
}

TEST(OnnxImport, TruncatedAndGarbledFilesGiveClearErrors) {
  std::string bytes = relu_add_model().SerializeAsString();
  for (size_t cut : {size_t(1), bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    try {
      import_onnx_bytes(bytes.data(), cut);
      // Some prefixes of a protobuf are themselves valid messages; then the model must be rejected as incomplete.
      ADD_FAILURE() << "a model truncated to " << cut << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  std::string garbled = bytes;
  for (size_t i = 0; i < garbled.size(); i += 7) garbled[i] = char(garbled[i] ^ 0x5a);
  EXPECT_THROW(import_onnx_bytes(garbled.data(), garbled.size()), Error);
  EXPECT_CUVIL_ERROR(import_onnx_bytes("\xff\xff\xff", 3), "not a valid ONNX model");
  EXPECT_CUVIL_ERROR(import_onnx_file("/nonexistent/model.onnx"), "cannot open");
}

TEST(OnnxImport, UnsupportedOpNamesOpNodeDomainAndOpset) {
  auto m = relu_add_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("FancyOp");
  EXPECT_CUVIL_ERROR(import(m), "unsupported op 'FancyOp' (domain 'ai.onnx', opset 13) at node 'relu_1'");
  m = relu_add_model();
  m.mutable_graph()->mutable_node(0)->set_domain("com.example");
  EXPECT_CUVIL_ERROR(import(m), "domain 'com.example'");
  m = relu_add_model();
  m.mutable_opset_import(0)->set_version(99);
  EXPECT_CUVIL_ERROR(import(m), "opset 99");
}

TEST(OnnxImport, MalformedGraphsGiveClearErrors) {
  auto m = relu_add_model();
  m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  EXPECT_CUVIL_ERROR(import(m), "input 'nowhere' is not defined");
  m = relu_add_model();
  m.mutable_graph()->mutable_initializer(0)->add_float_data(4.f);
  EXPECT_CUVIL_ERROR(import(m), "tensor 'w' has 4 values");
  m = relu_add_model();
  m.mutable_graph()->mutable_initializer(0)->clear_float_data();
  m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(5, '\0'));
  EXPECT_CUVIL_ERROR(import(m), "raw_data has 5 bytes");
  m = relu_add_model();
  m.mutable_graph()->mutable_output(0)->set_name("missing");
  EXPECT_CUVIL_ERROR(import(m), "output 'missing' is not produced");
  m = relu_add_model();
  m.mutable_graph()->mutable_initializer(0)->set_dims(0, 4);
  EXPECT_CUVIL_ERROR(import(m), "tensor 'w'");
  m = relu_add_model();
  set_symbolic_type(m.mutable_graph()->mutable_input(0), "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  EXPECT_CUVIL_ERROR(import(m), "Add node 'add_1'");
}

// Declared types are the model's contract: a graph output or value_info whose element type differs from what
// the nodes compute, or a graph output of another rank or static dims, is refused (they were ignored).
// value_info shapes are not held to: exporters leave them stale, and ONNX Runtime merges them leniently.
TEST(OnnxImport, DeclaredTypesMustMatchInference) {
  auto m = relu_add_model();
  auto retype_output = [](onnx::ModelProto& m, int elem, std::vector<std::string> dims) {
    m.mutable_graph()->mutable_output(0)->Clear();
    set_symbolic_type(m.mutable_graph()->mutable_output(0), "y", elem, std::move(dims));
  };
  retype_output(m, onnx::TensorProto::INT64, {"batch", "3"});
  EXPECT_CUVIL_ERROR(import(m), "graph output 'y' is declared i64 but the model computes f32[batch, 3]");
  m = relu_add_model();
  retype_output(m, onnx::TensorProto::FLOAT, {"batch", "4"});
  EXPECT_CUVIL_ERROR(import(m), "graph output 'y' is declared with dim 1 = 4");
  m = relu_add_model();
  retype_output(m, onnx::TensorProto::FLOAT, {"3"});
  EXPECT_CUVIL_ERROR(import(m), "graph output 'y' is declared with rank 1");
  m = relu_add_model();
  set_symbolic_type(m.mutable_graph()->add_value_info(), "r", onnx::TensorProto::DOUBLE, {"batch", "3"});
  EXPECT_CUVIL_ERROR(import(m), "value 'r' is declared f64");
  // Accepted: symbolic or absent dims, and a stale value_info shape.
  m = relu_add_model();
  retype_output(m, onnx::TensorProto::FLOAT, {"n", ""});
  set_symbolic_type(m.mutable_graph()->add_value_info(), "r", onnx::TensorProto::FLOAT, {"7", "7", "7"});
  EXPECT_NO_THROW(import(m));
}

TEST(OnnxImport, ExternalDataIsReadAndConfined) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "cuvil_ext_test";
  fs::create_directories(dir);
  float w[3] = {1, 2, 3};
  std::ofstream(dir / "weights.bin", std::ios::binary).write(reinterpret_cast<char*>(w), sizeof w);
  auto m = relu_add_model();
  auto* init = m.mutable_graph()->mutable_initializer(0);
  init->clear_float_data();
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  std::ofstream(dir / "model.onnx", std::ios::binary) << m.SerializeAsString();
  auto g = import_onnx_file((dir / "model.onnx").string());
  EXPECT_EQ(g->constants()[0]->constant().data<float>()[2], 3.f);

  kv->set_value("../../etc/passwd");
  std::ofstream(dir / "model.onnx", std::ios::binary | std::ios::trunc) << m.SerializeAsString();
  EXPECT_CUVIL_ERROR(import_onnx_file((dir / "model.onnx").string()), "may not leave the model's directory");
  kv->set_value("missing.bin");
  std::ofstream(dir / "model.onnx", std::ios::binary | std::ios::trunc) << m.SerializeAsString();
  EXPECT_CUVIL_ERROR(import_onnx_file((dir / "model.onnx").string()), "cannot open external data");
  fs::remove_all(dir);
}

TEST(Executor, ValidatesInputs) {
  auto m = relu_add_model();
  set_symbolic_type(m.mutable_graph()->add_input(), "z", onnx::TensorProto::FLOAT, {"batch", "2"});
  auto g = import(m);
  Executor exec(g);
  Tensor ok = Tensor::zeros(DType::f32, {2, 3});
  EXPECT_CUVIL_ERROR(exec.run({ok}), "expected 2 inputs, got 1");
  EXPECT_CUVIL_ERROR(exec.run({Tensor::zeros(DType::i32, {2, 3}), Tensor::zeros(DType::f32, {2, 2})}),
                     "input 'x': expected dtype f32, got i32");
  EXPECT_CUVIL_ERROR(exec.run({Tensor::zeros(DType::f32, {2, 3, 1}), Tensor::zeros(DType::f32, {2, 2})}),
                     "input 'x': expected rank 2");
  EXPECT_CUVIL_ERROR(exec.run({Tensor::zeros(DType::f32, {2, 4}), Tensor::zeros(DType::f32, {2, 2})}),
                     "input 'x': dim 1 must be 3");
  EXPECT_CUVIL_ERROR(exec.run({ok, Tensor::zeros(DType::f32, {5, 2})}),
                     "input 'z': dim 0 is 'batch' = 2 from an earlier input, but this input has 5");
  EXPECT_CUVIL_ERROR(exec.run_named(std::map<std::string, Tensor>{{"x", ok}}), "missing input 'z'");
  EXPECT_CUVIL_ERROR(exec.run_named(std::map<std::string, Tensor>{{"x", ok}, {"z", ok}, {"q", ok}}), "unknown input 'q'");
}

TEST(Executor, PlansOneArenaWithReuse) {
  // A chain of 6 Relus on [64, 64]: liveness lets the arena hold only two buffers (or fewer, in place).
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  set_symbolic_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {"64", "64"});
  std::string prev = "x";
  for (int i = 0; i < 6; ++i) {
    auto* n = g->add_node();
    n->set_op_type(i % 2 ? "Relu" : "Neg");
    n->add_input(prev);
    prev = "v" + std::to_string(i);
    n->add_output(prev);
  }
  set_symbolic_type(g->add_output(), prev, onnx::TensorProto::FLOAT, {"64", "64"});
  Executor exec(import(m));
  Tensor x = Tensor::zeros(DType::f32, {64, 64});
  x.data<float>()[5] = 3;
  auto out = exec.run({x});
  EXPECT_EQ(out[0].data<float>()[5], 0.f);  // -3 -> relu 0 -> ... stays 0
  // Neg and Relu compute in place: the five intermediates (the last value is an output, outside the arena) share
  // one buffer.
  EXPECT_EQ(exec.stats().inplace_reuses, 4);
  EXPECT_EQ(exec.stats().planned_bytes, 64 * 64 * 4);
  EXPECT_EQ(exec.stats().arena_bytes, 64 * 64 * 4);
}

namespace {

// If(cond) nested `depth` levels: each then-branch holds the next If, each else-branch and the innermost
// then-branch an Identity of the outer x.
onnx::ModelProto nested_ifs(int depth) {
  onnx::ModelProto m = onnx_model(8, 13);
  auto* g = m.mutable_graph();
  set_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2});
  auto identity_graph = [](onnx::GraphProto* b, const std::string& out) {
    b->set_name(out + "_g");
    auto* n = b->add_node();
    n->set_op_type("Identity");
    n->add_input("x");
    n->add_output(out);
    b->add_output()->set_name(out);
  };
  onnx::GraphProto* at = g;
  for (int d = 0; d < depth; ++d) {
    std::string out = "y" + std::to_string(d);
    auto* n = at->add_node();
    n->set_op_type("If");
    n->add_input("cond");
    n->add_output(out);
    if (d == 0) set_type(at->add_output(), out, onnx::TensorProto::FLOAT, {2});
    else at->add_output()->set_name(out);
    auto* els = n->add_attribute();
    els->set_name("else_branch");
    els->set_type(onnx::AttributeProto::GRAPH);
    identity_graph(els->mutable_g(), out + "_e");
    auto* then = n->add_attribute();
    then->set_name("then_branch");
    then->set_type(onnx::AttributeProto::GRAPH);
    then->mutable_g()->set_name(out + "_t");
    at = then->mutable_g();
  }
  identity_graph(at, "leaf");
  return m;
}

}  // namespace

// protobuf's default recursion limit (100 messages) made 33 nested Ifs "cannot be parsed"; now nesting up to
// Cuvil's limit imports, and past it the error names the limit.
TEST(OnnxImport, DeeplyNestedRegionsParseUpToTheNestingLimit) {
  EXPECT_NO_THROW(import(nested_ifs(40)));
  EXPECT_CUVIL_ERROR(import(nested_ifs(70)), "limit of 64");
}
