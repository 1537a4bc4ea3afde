#include "frontend/onnx/onnx_importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "frontend/onnx/converter.h"
#include "frontend/onnx/graph_order.h"
#include "frontend/onnx/shape_decided_ifs.h"
#include "frontend/onnx/static_sequences.h"
#include "ir/low_precision.h"
#include "ir/op_schema.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "support/file_io.h"

namespace cuvil {

namespace {

// The newest default-domain opset Cuvil imports: that of onnx 1.23. Converters normalize every op's form up to it
// to the op table's, and refuse the attribute values whose meaning they do not implement.
constexpr int kMaxOpset = 28;

// Protobuf parses at most 2 GiB; a larger file is refused from its size, before any of it is read.
constexpr uint64_t kMaxOnnxFileBytes = uint64_t(INT32_MAX);

// A model or TensorProto file: a regular file (no FIFO, device or directory) of at most 2 GiB.
std::string read_onnx_file(const RegularFile& f) {
  CUVIL_CHECK(f.size() <= kMaxOnnxFileBytes, f.what(), " '", f.path(), "' is ", byte_size_str(f.size()),
              ": an ONNX file larger than 2 GiB cannot be parsed; store weights as external data");
  return f.read_all(kMaxOnnxFileBytes);
}

// Where external data is looked up and where it may really be. Locations are relative to `dir`, the model's
// directory as named (so a model reached through a symbolic link finds its data next to the link, as ONNX
// Runtime does); the file they lead to, every symbolic link resolved, must lie under one of `real_roots`: the
// real path of `dir`, and the real directory of the model file itself (a store of content-addressed blobs that
// both the model and its data link into, as the Hugging Face cache is). Empty `dir`: external data is refused.
struct ExternalDataDir {
  std::string dir;
  std::vector<std::string> real_roots;  // computed from `dir` when first needed, if empty
};

// ONNX names may be any string; dim_param names become symbols, which must be identifiers.
std::string symbol_name(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (r.empty() || std::isdigit(static_cast<unsigned char>(r[0])) || r[0] == '_') r = "s" + r;
  return r;
}

TensorType convert_type(const onnx::TypeProto& tp, const std::string& what) {
  CUVIL_CHECK(tp.has_tensor_type(), what, ": only tensor types are supported here (map and sparse values are not; "
              "sequences and optionals only as inputs of the main graph, bound at import)");
  const auto& tt = tp.tensor_type();
  auto dt = dtype_from_onnx_id(tt.elem_type());
  CUVIL_CHECK(dt, what, ": unsupported element type ", onnx::TensorProto_DataType_Name(tt.elem_type()), " (",
              tt.elem_type(), ")");
  if (!tt.has_shape()) return {*dt, Shape::unknown_rank()};
  std::vector<Dim> dims;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value() && d.dim_value() >= 0) {
      dims.push_back(Dim(d.dim_value()));
    } else if (d.has_dim_value()) {
      // Some exporters (Paddle's) write -1 for a dim fixed only at run time: a symbol, as ONNX Runtime reads it.
      CUVIL_CHECK(d.dim_value() == -1, what, ": negative dim ", d.dim_value());
      dims.push_back(Dim::symbol(symbol_name(what) + "_d" + std::to_string(i)));
    } else if (d.has_dim_param() && std::any_of(d.dim_param().begin(), d.dim_param().end(), [](char ch) {
                 return std::isalnum(static_cast<unsigned char>(ch)) != 0;
               })) {
      // (A name without letters or digits, such as Paddle's "?", says only "unknown": a symbol of its own below.)
      dims.push_back(Dim::symbol(symbol_name(d.dim_param())));
    } else {
      dims.push_back(Dim::symbol(symbol_name(what) + "_d" + std::to_string(i)));
    }
  }
  return {*dt, Shape(dims)};
}

template <class T, class Src>
void copy_field(Tensor& t, const Src& field, const std::string& name) {
  CUVIL_CHECK(int64_t(field.size()) == t.numel(), "tensor '", name, "' has ", field.size(), " values for ",
              t.type_str());
  T* out = static_cast<T*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = T(field.Get(int(i)));
}

// Reads external tensor data, after checking that the location stays inside the model's directory (as written
// and, symbolic links resolved, as it really is), that it names a regular file, and that the file holds the
// declared bytes (so a corrupt model cannot make us allocate more than the file it points at, nor read a FIFO or
// a device).
Tensor load_external(const onnx::TensorProto& tp, DType dtype, const std::vector<int64_t>& dims,
                     const ExternalDataDir& ext) {
  std::string location;
  int64_t offset = 0, length = -1;
  auto parse_size = [&](const std::string& key, const std::string& v) {
    int64_t n = -1;
    auto r = std::from_chars(v.data(), v.data() + v.size(), n);
    CUVIL_CHECK(r.ec == std::errc() && r.ptr == v.data() + v.size() && n >= 0, "tensor '", tp.name(),
                "': external data ", key, " '", v, "' is not a non-negative integer");
    return n;
  };
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = parse_size("offset", kv.value());
    else if (kv.key() == "length") length = parse_size("length", kv.value());
  }
  CUVIL_CHECK(!location.empty(), "tensor '", tp.name(), "': external data without a location");
  CUVIL_CHECK(!ext.dir.empty(), "tensor '", tp.name(), "': external data '", location,
              "' needs the model's directory (load the model from a file)");
  CUVIL_CHECK(location.find('\0') == std::string::npos, "tensor '", tp.name(), "': external data path '", location,
              "' holds a NUL byte");
  std::filesystem::path rel(location);
  CUVIL_CHECK(rel.is_relative(), "tensor '", tp.name(), "': external data path '", location, "' must be relative");
  for (const auto& part : rel)
    CUVIL_CHECK(part != "..", "tensor '", tp.name(), "': external data path '", location,
                "' may not leave the model's directory");
  std::string path = (std::filesystem::path(ext.dir) / rel).string();
  int64_t want = shape_numel(dims) * int64_t(dtype_size(dtype));
  if (length < 0) length = want;
  CUVIL_CHECK(length == want, "tensor '", tp.name(), "': external data length ", length, " but ",
              dtype_name(dtype), shape_str(dims), " needs ", want, " bytes");
  Tensor t;
  try {
    RegularFile f = RegularFile::open(path, "external data file");
    // Confinement: the file actually opened, its symbolic links resolved, must be inside the model's directory.
    std::vector<std::string> roots = ext.real_roots;
    if (roots.empty()) roots.push_back(real_path_of(ext.dir, "model directory"));
    std::string real = f.real_path();
    bool inside = false;
    for (const auto& r : roots) inside |= path_is_within(real, r);
    CUVIL_CHECK(inside, "external data '", location,
                "' leads outside the model's directory (through a symbolic link); refused");
    int64_t file_size = int64_t(f.size());
    CUVIL_CHECK(offset <= file_size && length <= file_size - offset, "external data [", offset, ", ",
                offset + std::min(length, INT64_MAX - offset), ") is past the end of '", path, "' (", file_size,
                " bytes)");
    t = Tensor::zeros(dtype, dims);
    if (length) f.read_at(uint64_t(offset), t.raw(), size_t(length));
  } catch (const Error& e) {
    throw Error("tensor '" + tp.name() + "': " + e.what());
  }
  return t;
}

}  // namespace

// 4- and 2-bit element types: ONNX packs the codes, low bits first, into raw_data or into int32_data's entries (one
// byte each); Cuvil's tensors hold one code per byte.
static Tensor unpack_sub_byte(const onnx::TensorProto& tp, DType dt, const std::vector<int64_t>& dims, int64_t numel) {
  const std::string& name = tp.name();
  CUVIL_CHECK(tp.data_location() != onnx::TensorProto::EXTERNAL, "tensor '", name, "': external data of ",
              dtype_name(dt), " is not supported");
  int bits = low_precision_bits(dt), per_byte = 8 / bits;
  int64_t need = (numel + per_byte - 1) / per_byte;
  int64_t present = tp.has_raw_data() ? int64_t(tp.raw_data().size()) : int64_t(tp.int32_data_size());
  CUVIL_CHECK(present == need, "tensor '", name, "': ", dtype_name(dt), shape_str(dims), " packs into ", need,
              " bytes, but the tensor holds ", present);
  Tensor t = Tensor::zeros(dt, dims);
  uint8_t* out = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < numel; ++i) {
    int64_t b = i / per_byte;
    uint8_t byte = tp.has_raw_data() ? uint8_t(tp.raw_data()[size_t(b)]) : uint8_t(tp.int32_data(int(b)));
    out[i] = uint8_t((byte >> (bits * (i % per_byte))) & ((1 << bits) - 1));
  }
  return t;
}

// The public form (converter.h): external data looked up in, and confined to, `base_dir`.
static Tensor onnx_tensor_to_cuvil(const void* proto, const ExternalDataDir& ext);
Tensor onnx_tensor_to_cuvil(const void* proto, const std::string& base_dir) {
  return onnx_tensor_to_cuvil(proto, ExternalDataDir{base_dir, {}});
}

static Tensor onnx_tensor_to_cuvil(const void* proto, const ExternalDataDir& ext) {
  const auto& tp = *static_cast<const onnx::TensorProto*>(proto);
  const std::string& name = tp.name();
  auto dt = dtype_from_onnx_id(tp.data_type());
  CUVIL_CHECK(dt, "tensor '", name, "': unsupported element type ",
              onnx::TensorProto_DataType_IsValid(tp.data_type())
                  ? onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(tp.data_type()))
                  : std::to_string(tp.data_type()));
  std::vector<int64_t> dims(tp.dims().begin(), tp.dims().end());
  // Check the declared size against the data actually present before allocating anything: a corrupt file may
  // declare petabytes.
  int64_t numel = 1;
  for (int64_t d : dims) {
    CUVIL_CHECK(d >= 0, "tensor '", name, "': negative dim ", d);
    CUVIL_CHECK(!__builtin_mul_overflow(numel, d, &numel) && numel <= (int64_t(1) << 40), "tensor '", name,
                "': dims ", shape_str(dims), " are too large");
  }
  CUVIL_CHECK(!tp.has_segment(), "tensor '", name, "': segmented tensors are not supported");
  if (*dt == DType::str) {
    CUVIL_CHECK(tp.data_location() != onnx::TensorProto::EXTERNAL && !tp.has_raw_data(), "tensor '", name,
                "': strings are read from string_data only (not raw_data or external data)");
    CUVIL_CHECK(tp.string_data_size() == numel, "tensor '", name, "' has ", tp.string_data_size(),
                " strings for str", shape_str(dims));
    return Tensor::strings({tp.string_data().begin(), tp.string_data().end()}, dims);
  }
  if (is_low_precision(*dt) && low_precision_bits(*dt) < 8) return unpack_sub_byte(tp, *dt, dims, numel);
  int64_t bytes = numel * int64_t(dtype_size(*dt));
  if (tp.data_location() != onnx::TensorProto::EXTERNAL) {
    int64_t present = tp.has_raw_data() ? int64_t(tp.raw_data().size())
                                        : int64_t(tp.float_data_size() + tp.double_data_size() +
                                                  tp.int32_data_size() + tp.int64_data_size() +
                                                  tp.uint64_data_size()) * int64_t(dtype_size(*dt));
    CUVIL_CHECK(present == bytes || !tp.has_raw_data(), "tensor '", name, "': raw_data has ", present,
                " bytes, but ", dtype_name(*dt), shape_str(dims), " needs ", bytes);
    CUVIL_CHECK(tp.has_raw_data() || present == bytes, "tensor '", name, "' has ",
                present / int64_t(dtype_size(*dt)), " values for ", dtype_name(*dt), shape_str(dims));
  }
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) return load_external(tp, *dt, dims, ext);
  Tensor t = Tensor::zeros(*dt, dims);
  if (tp.has_raw_data()) {
    CUVIL_CHECK(tp.raw_data().size() == t.nbytes(), "tensor '", name, "': raw_data has ", tp.raw_data().size(),
                " bytes, but ", t.type_str(), " needs ", t.nbytes());
    if (t.nbytes()) std::memcpy(t.raw(), tp.raw_data().data(), t.nbytes());
    return t;
  }
  switch (*dt) {
    case DType::f32: copy_field<float>(t, tp.float_data(), name); break;
    case DType::f64: copy_field<double>(t, tp.double_data(), name); break;
    case DType::i64: copy_field<int64_t>(t, tp.int64_data(), name); break;
    case DType::i32: copy_field<int32_t>(t, tp.int32_data(), name); break;
    case DType::i16: copy_field<int16_t>(t, tp.int32_data(), name); break;
    case DType::i8: copy_field<int8_t>(t, tp.int32_data(), name); break;
    case DType::u16: copy_field<uint16_t>(t, tp.int32_data(), name); break;
    case DType::u8: copy_field<uint8_t>(t, tp.int32_data(), name); break;
    case DType::boolean: copy_field<bool>(t, tp.int32_data(), name); break;
    case DType::f16:  // the bits, stored in int32_data
    case DType::bf16: copy_field<uint16_t>(t, tp.int32_data(), name); break;
    case DType::u32: copy_field<uint32_t>(t, tp.uint64_data(), name); break;
    case DType::u64: copy_field<uint64_t>(t, tp.uint64_data(), name); break;
    default:  // the 8-bit low-precision types: one code per int32_data entry
      copy_field<uint8_t>(t, tp.int32_data(), name);
      break;
  }
  return t;
}

// ---- ConvertContext

const std::string& ConvertContext::op_type() const { return node_.op_type(); }

std::optional<Attribute> ConvertContext::take_attr(const std::string& n) {
  auto it = attrs_.find(n);
  if (it == attrs_.end()) return std::nullopt;
  Attribute a = std::move(it->second);
  attrs_.erase(it);
  return a;
}

Value* ConvertContext::const_tensor(Tensor t, const std::string& hint) {
  std::string base = output_names_.empty() || output_names_[0].empty() ? "c" : output_names_[0];
  return graph_.add_constant(graph_.unique_name(base + "_" + hint), std::move(t));
}

Value* ConvertContext::const_i64(const std::vector<int64_t>& v, const std::string& hint) {
  return const_tensor(Tensor::from_vector<int64_t>(v, {int64_t(v.size())}), hint);
}

Node* ConvertContext::emit(OpKind op) { return emit_final(op, inputs_, attrs_); }

Node* ConvertContext::emit_temp(OpKind op, std::vector<Value*> inputs, AttrMap attrs, size_t num_outputs) {
  std::vector<std::string> names;
  std::string base = output_names_.empty() || output_names_[0].empty() ? "t" : output_names_[0];
  // Numbered when there are several: names are only taken once the node exists.
  for (size_t i = 0; i < num_outputs; ++i)
    names.push_back(graph_.unique_name(base + "_" + std::string(op_name(op)) +
                                       (num_outputs > 1 ? "_" + std::to_string(i) : "")));
  return graph_.add_node(op, std::move(inputs), names, std::move(attrs), loc_);
}

Node* ConvertContext::emit_final(OpKind op, std::vector<Value*> inputs, AttrMap attrs) {
  // Trailing omitted inputs are dropped; omitted inputs in the middle stay as nullptr.
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  const OpSchema& s = op_schema(op);
  for (auto& [name, a] : attrs) {
    const AttrSpec* spec = s.find_attr(name);
    if (!spec) error("attribute '", name, "' is not supported");
    if (spec->kind != a.kind() && !(spec->kind == AttrKind::Float && a.kind() == AttrKind::Int))
      error("attribute '", name, "' must be ", attr_kind_name(spec->kind), ", got ", attr_kind_name(a.kind()));
    if (spec->kind == AttrKind::Float && a.kind() == AttrKind::Int) a = Attribute(double(a.i()));
  }
  return graph_.add_node(op, std::move(inputs), output_names_, std::move(attrs), loc_);
}

const OnnxConverterTable& onnx_converters() {
  static const OnnxConverterTable table = [] {
    OnnxConverterTable t;
    register_onnx_elementwise(t);
    register_onnx_reduction(t);
    register_onnx_tensor(t);
    register_onnx_nn(t);
    register_onnx_recurrent(t);
    register_onnx_control(t);
    register_onnx_functions(t);
    register_onnx_contrib(t);
    register_onnx_ml(t);
    register_onnx_trees(t);
    register_onnx_training(t);
    register_onnx_text(t);
    return t;
  }();
  return table;
}

// ---- the importer

namespace {

class Importer {
 public:
  Importer(ExternalDataDir ext, const OnnxImportOptions& opts) : base_dir_(std::move(ext)), opts_(opts) {}

  std::shared_ptr<Graph> import_model(const onnx::ModelProto& m) {
    CUVIL_CHECK(m.has_graph(), "ONNX model has no graph");
    opset_ = -1;
    for (const auto& op : m.opset_import()) {
      std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
      if (domain.empty()) opset_ = int(op.version());
      domain_opsets_[domain] = int(op.version());
    }
    if (opset_ < 0) opset_ = m.opset_import_size() == 0 ? 1 : opset_;
    // A model of other domains only (ai.onnx.ml pipelines) is valid while it uses no ai.onnx op; its converters'
    // expansions into op-table ops read the newest opset.
    default_imported_ = opset_ >= 1;
    if (!default_imported_) opset_ = kMaxOpset;
    CUVIL_CHECK(opset_ <= kMaxOpset, "ONNX model uses opset ", opset_, "; Cuvil supports opsets up to ", kMaxOpset,
                " (onnx 1.23)");
    for (const auto& f : m.functions()) functions_[f.domain() + ":" + f.name()] = &f;
    if (opts_.stop_at_unbound_sequences && opts_.layout && has_unbound_sequence_input(m.graph())) return nullptr;
    auto g = std::make_shared<Graph>(m.graph().name().empty() ? "main" : m.graph().name());
    convert_graph(m.graph(), *g, /*is_region=*/false);
    return g;
  }

 private:
  // Whether a sequence-typed main-graph input lacks its length; if so, layout->inputs gets every input's kind.
  bool has_unbound_sequence_input(const onnx::GraphProto& gp) const {
    std::unordered_set<std::string> init_names;
    for (const auto& init : gp.initializer()) init_names.insert(init.name());
    std::vector<OnnxIoSlot> slots;
    bool unbound = false;
    for (const auto& in : gp.input()) {
      if (init_names.count(in.name())) continue;
      const onnx::TypeProto* t = &in.type();
      OnnxIoSlot s{in.name(), OnnxIoSlot::Kind::Tensor, 1};
      if (t->has_optional_type()) {
        s.optional = true;
        t = &t->optional_type().elem_type();
      }
      if (t->has_sequence_type()) {
        s.kind = OnnxIoSlot::Kind::Sequence;
        auto len = opts_.sequence_lengths.find(in.name());
        s.count = len == opts_.sequence_lengths.end() ? 0 : size_t(len->second);
        unbound |= len == opts_.sequence_lengths.end();
      }
      slots.push_back(std::move(s));
    }
    if (unbound) opts_.layout->inputs = std::move(slots);
    return unbound;
  }

  // Every name the graph's nodes, subgraphs and outputs read: initializers outside it are never loaded.
  static void collect_reads(const onnx::GraphProto& gp, std::unordered_set<std::string>& reads) {
    std::vector<const onnx::GraphProto*> pending{&gp};
    while (!pending.empty()) {
      const onnx::GraphProto& g = *pending.back();
      pending.pop_back();
      for (const auto& n : g.node()) {
        for (const auto& in : n.input()) reads.insert(in);
        for (const auto& a : n.attribute()) {
          if (a.has_g()) pending.push_back(&a.g());
          for (const auto& sg : a.graphs()) pending.push_back(&sg);
        }
      }
      for (const auto& o : g.output()) reads.insert(o.name());
    }
  }

  void convert_graph(const onnx::GraphProto& gp, Graph& g, bool is_region) {
    CUVIL_CHECK(gp.sparse_initializer_size() == 0, "graph '", gp.name(), "': sparse initializers are not supported");
    std::unordered_set<std::string> reads;
    collect_reads(gp, reads);
    std::unordered_set<std::string> init_names;
    for (const auto& init : gp.initializer()) {
      CUVIL_CHECK(!init.name().empty(), "graph '", gp.name(), "': an initializer has no name");
      CUVIL_CHECK(init_names.insert(init.name()).second, "graph '", gp.name(), "': duplicate initializer '",
                  init.name(), "'");
      // Unused initializers (left behind by graph surgery) are not loaded: no memory, no read of external data.
      if (!reads.count(init.name())) continue;
      g.add_constant(init.name(), shared_copy(onnx_tensor_to_cuvil(&init, base_dir_)));
    }
    for (const auto& in : gp.input()) {
      // An initializer listed as an input: before IR 4 every initializer was; since, it is an input whose default
      // the initializer gives (ONNX Runtime's "overridable initializer"). Cuvil takes the default: a constant.
      if (init_names.count(in.name())) continue;
      CUVIL_CHECK(!in.name().empty(), "graph '", gp.name(), "': an input has no name");
      CUVIL_CHECK(in.has_type() || is_region, "graph input '", in.name(), "' has no type");
      if (in.has_type() && !in.type().has_tensor_type() && bind_static_input(in, g, is_region)) continue;
      if (!is_region && opts_.layout) opts_.layout->inputs.push_back({in.name(), OnnxIoSlot::Kind::Tensor, 1});
      TensorType t = in.has_type() && in.type().has_tensor_type()
                         ? convert_type(in.type(), "input '" + in.name() + "'")
                         : (in.has_type() ? convert_type(in.type(), "input '" + in.name() + "'")
                                          : TensorType{DType::f32, Shape::unknown_rank()});
      CUVIL_CHECK(!g.lookup(in.name()) || g.lookup(in.name())->graph() != &g, "duplicate graph input '", in.name(),
                  "'");
      g.add_input(in.name(), t);
    }
    // Nodes in a topological order (exporters do not always write one; ONNX Runtime sorts too).
    for (int i : onnx_node_order(gp)) convert_node(gp.node(i), g);
    std::vector<OnnxIoSlot> layout;
    for (const auto& out : gp.output()) {
      if (auto st = statics_.find(out.name()); st != statics_.end()) {
        if (st->second.kind == StaticValue::Kind::Stacked)
          throw StaticSequenceError("graph '" + gp.name() + "' output '" + out.name() + "' is a sequence whose " +
                                    "length is known only at run time (a Loop's appended list); Cuvil resolves " +
                                    "sequences when the graph is built, and reads such a one only through " +
                                    "ConcatFromSequence, SequenceAt and SequenceLength");
        // A sequence output is its elements, in order; an empty optional is nothing.
        bool none = st->second.kind == StaticValue::Kind::None;
        for (Value* e : st->second.elems) g.add_output(e);
        layout.push_back({out.name(), none ? OnnxIoSlot::Kind::None : OnnxIoSlot::Kind::Sequence,
                          st->second.elems.size()});
        continue;
      }
      layout.push_back({out.name(), OnnxIoSlot::Kind::Tensor, 1});
      Value* v = g.lookup(out.name());
      CUVIL_CHECK(v, "graph '", gp.name(), "' output '", out.name(), "' is not produced by any node");
      g.add_output(v);
      if (!is_region && out.has_type()) declared_.push_back({v, &out.type(), /*output=*/true});
    }
    if (is_region) region_layouts_[&g] = std::move(layout);
    else if (opts_.layout) opts_.layout->outputs = std::move(layout);
    if (!is_region)
      for (const auto& vi : gp.value_info())
        if (Value* v = g.lookup(vi.name()); v && vi.has_type()) declared_.push_back({v, &vi.type(), false});
  }

 public:
  // The main graph's declared types against what inference found: an element type that differs is an error
  // (as in ONNX Runtime), and so are a graph output's rank and static dims; value_info shapes, which exporters
  // leave stale after graph surgery, are not held to (ONNX Runtime merges them leniently too).
  // After inline_shape_decided_ifs: declared If outputs are checked on the values standing in for them; what was
  // declared inside the inlined Ifs' regions is gone with them (the taken branch's copies are checked through the
  // If's outputs).
  void retarget_declared(const InlinedIfs& inlined) {
    if (!inlined.count) return;
    std::vector<Declared> kept;
    for (Declared d : declared_) {
      if (inlined.erased.count(d.value)) continue;
      if (auto it = inlined.replaced.find(d.value); it != inlined.replaced.end()) d.value = it->second;
      kept.push_back(d);
    }
    declared_ = std::move(kept);
  }

  void check_declared_types() const {
    for (const Declared& d : declared_) {
      if (!d.type->has_tensor_type()) continue;
      const auto& tt = d.type->tensor_type();
      const TensorType& got = d.value->type();
      std::string what = std::string(d.output ? "graph output '" : "value '") + d.value->name() + "'";
      std::string by = d.value->producer() ? " (computed by " + d.value->producer()->describe() + ")" : "";
      if (tt.elem_type() != onnx::TensorProto::UNDEFINED) {
        auto dt = dtype_from_onnx_id(tt.elem_type());
        CUVIL_CHECK(!dt || *dt == got.dtype, what, " is declared ", dtype_name(*dt), " but the model computes ",
                    got.str(), by);
      }
      // (ONNX Runtime infers no shapes through sequences, so what exporters declare for a tensor read out of one
      // is unchecked there, and torch.onnx's guesses can be wrong: only its element type is held to.)
      if (!d.output || !tt.has_shape() || !got.shape.rank_known() || from_sequences_.count(d.value->name())) continue;
      CUVIL_CHECK(size_t(tt.shape().dim_size()) == got.shape.rank(), what, " is declared with rank ",
                  tt.shape().dim_size(), " but the model computes ", got.str(), by);
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& dim = tt.shape().dim(i);
        const Dim& g = got.shape.dims()[size_t(i)];
        CUVIL_CHECK(!dim.has_dim_value() || !g.is_const() || g.value() == dim.dim_value(), what,
                    " is declared with dim ", i, " = ", dim.dim_value(), " but the model computes ", got.str(), by);
      }
    }
  }

 private:
  struct Declared {
    const Value* value;
    const onnx::TypeProto* type;  // in the ModelProto, which outlives the check
    bool output;
  };
  std::vector<Declared> declared_;

  Attribute convert_attr(const onnx::AttributeProto& a, Graph& g, const std::string& where) {
    switch (a.type()) {
      case onnx::AttributeProto::FLOAT: return Attribute(double(a.f()));
      case onnx::AttributeProto::INT: return Attribute(int64_t(a.i()));
      case onnx::AttributeProto::STRING: return Attribute(a.s());
      case onnx::AttributeProto::TENSOR: return Attribute(onnx_tensor_to_cuvil(&a.t(), base_dir_));
      case onnx::AttributeProto::GRAPH: return Attribute(convert_region(a.g(), g, a.name()));
      case onnx::AttributeProto::FLOATS: return Attribute(std::vector<double>(a.floats().begin(), a.floats().end()));
      case onnx::AttributeProto::INTS: return Attribute(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
      case onnx::AttributeProto::STRINGS:
        return Attribute(std::vector<std::string>(a.strings().begin(), a.strings().end()));
      case onnx::AttributeProto::GRAPHS: {
        std::vector<GraphPtr> gs;
        for (const auto& sg : a.graphs()) gs.push_back(convert_region(sg, g, a.name()));
        return Attribute(gs);
      }
      default: break;
    }
    fail(where, ": attribute '", a.name(), "' has an unsupported type (",
         onnx::AttributeProto_AttributeType_Name(a.type()), ")");
  }

  GraphPtr convert_region(const onnx::GraphProto& gp, Graph& parent, const std::string& attr_name) {
    auto r = std::make_shared<Graph>(gp.name().empty() ? attr_name : gp.name());
    r->set_parent(&parent);
    convert_graph(gp, *r, /*is_region=*/true);
    return r;
  }

  void convert_node(const onnx::NodeProto& np, Graph& g) {
    Location loc;
    loc.name = np.name().empty() ? (np.output_size() ? np.output(0) : np.op_type()) : np.name();
    std::string where = "ONNX " + np.op_type() + " " + loc.str();
    const std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (auto f = functions_.find(np.domain() + ":" + np.op_type()); f != functions_.end())
      return inline_function(np, *f->second, g, where);
    if (domain.empty() && (is_sequence_op(np.op_type()) || reads_static(np))) {
      CUVIL_CHECK(default_imported_, where,
                  ": the model does not import the default (ai.onnx) operator set that this op belongs to");
      SequenceImportContext sctx{np, g, loc, statics_,
                                 [&](const onnx::GraphProto& body, const std::vector<std::string>& args) {
                                   return inline_body(body, args, g, loc.name);
                                 },
                                 [&](const onnx::NodeProto& rewritten) { convert_node(rewritten, g); }};
      if (convert_static_sequence_node(sctx)) {
        // (a Loop's tensor outputs are computed as any Loop's, not read out of a sequence)
        if (np.op_type() != "Loop")
          for (const auto& o : np.output()) from_sequences_.insert(o);
        return;
      }
    }
    std::vector<Value*> inputs;
    for (const auto& name : np.input()) {
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      Value* v = g.lookup(name);
      CUVIL_CHECK(v, where, ": input '", name, "' is not defined before this node");
      inputs.push_back(v);
    }
    if (domain.empty() && np.op_type() == "If" && !inputs.empty() && inputs[0] && inputs[0]->is_constant() &&
        inputs[0]->constant().numel() == 1)
      return inline_taken_branch(np, g, inputs[0]->constant().get_i64(0) != 0, loc, where);
    AttrMap attrs;
    for (const auto& a : np.attribute()) {
      if (!a.ref_attr_name().empty())
        fail(where, ": attribute '", a.name(), "' refers to '", a.ref_attr_name(), "' outside a function body");
      attrs[a.name()] = convert_attr(a, g, where);
    }
    // Omitted outputs in the middle get placeholder names; trailing ones are dropped.
    std::vector<std::string> outs(np.output().begin(), np.output().end());
    while (!outs.empty() && outs.back().empty()) outs.pop_back();
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k].empty()) outs[k] = g.unique_name(loc.name + "_unused" + std::to_string(k));
    CUVIL_CHECK(!domain.empty() || default_imported_, where,
                ": the model does not import the default (ai.onnx) operator set that this op belongs to");
    if (np.op_type() == "Constant" && domain.empty()) return convert_constant(np, g, attrs, outs, where);
    if (regions_yield_static_values(attrs, where)) return convert_static_if(np, g, inputs, attrs, outs, loc, where);
    ConvertContext ctx(np, opset_, g, std::move(inputs), std::move(attrs), outs, loc);
    // channels_last is Cuvil's own attribute (set by the assign-layouts pass), not ONNX's (contrib ops have their
    // own, which their converters read).
    for (const auto& a : np.attribute())
      CUVIL_CHECK(!domain.empty() || a.name() != "channels_last", "unsupported attribute 'channels_last' of ", np.op_type(), " at ",
                  loc.str());
    const auto& table = onnx_converters();
    auto it = table.find(domain.empty() ? np.op_type() : domain + ":" + np.op_type());
    if (it != table.end()) {
      it->second(ctx);
      return;
    }
    auto version = [&](const std::string& d) {
      auto v = domain_opsets_.find(d);
      return v == domain_opsets_.end() ? std::string("not imported") : "opset " + std::to_string(v->second);
    };
    CUVIL_CHECK(domain.empty(), "unsupported op '", np.op_type(), "' (domain '", domain, "', ", version(domain),
                ") at ", loc.str(), ": Cuvil converts the ops of 'ai.onnx', and those of 'com.microsoft' and ",
                "'ai.onnx.ml' that exported models use");
    auto kind = op_from_name(np.op_type());
    // Fused ops are Cuvil's own (made by passes): not ONNX, never imported.
    CUVIL_CHECK(kind && op_family(*kind) != "fused", "unsupported op '", np.op_type(), "' (domain 'ai.onnx', opset ",
                opset_, ") at ", loc.str());
    ctx.emit(*kind);
  }

  // An If whose condition is a constant while importing (OptionalHasElement of a bound optional, a constant
  // flag) is its taken branch, inlined; the other branch is never converted, since it may be invalid for these
  // inputs (getting the element of the optional it tested, say). ONNX Runtime folds such Ifs too.
  void inline_taken_branch(const onnx::NodeProto& np, Graph& g, bool cond, const Location& loc,
                           const std::string& where) {
    const char* name = cond ? "then_branch" : "else_branch";
    const onnx::GraphProto* branch = nullptr;
    for (const auto& a : np.attribute())
      if (a.name() == name && a.has_g()) branch = &a.g();
    CUVIL_CHECK(branch, where, ": attribute '", name, "' (a graph) is required");
    CUVIL_CHECK(branch->input_size() == 0, where, ": ", name, " must take no inputs, it takes ", branch->input_size());
    std::vector<std::string> yielded = inline_body(*branch, {}, g, loc.name);
    CUVIL_CHECK(size_t(np.output_size()) <= yielded.size(), where, ": has ", np.output_size(), " outputs but ", name,
                " yields ", yielded.size());
    for (int i = 0; i < np.output_size(); ++i) {
      const std::string& out = np.output(i);
      if (out.empty()) continue;
      if (auto st = statics_.find(yielded[size_t(i)]); st != statics_.end()) {
        statics_[out] = st->second;
        continue;
      }
      Value* v = g.lookup(yielded[size_t(i)]);
      CUVIL_CHECK(v, where, ": ", name, " output '", yielded[size_t(i)], "' is not defined");
      g.add_node(OpKind::Identity, {v}, {out}, {}, loc);
      if (from_sequences_.count(yielded[size_t(i)])) from_sequences_.insert(out);
    }
  }

  bool reads_static(const onnx::NodeProto& np) const {
    for (const auto& in : np.input())
      if (!in.empty() && statics_.count(in)) return true;
    return false;
  }

  // A sequence- or optional-typed graph input: bound from the options (main graph) or refused (regions, whose
  // inputs only Loop and Scan bodies have, and those carrying sequences are unrolled instead). Returns true when
  // the input became a static value (false: an optional bound as present holding a tensor, imported as one).
  bool bind_static_input(const onnx::ValueInfoProto& in, Graph& g, bool is_region) {
    const std::string& name = in.name();
    if (is_region)
      throw StaticSequenceError("region input '" + name + "' is a sequence or optional value; Cuvil resolves "
                                "those when the graph is built, so a Loop or Scan body cannot take one");
    const onnx::TypeProto* t = &in.type();
    if (t->has_optional_type()) {
      if (opts_.absent_optionals.count(name)) {
        statics_[name] = StaticValue{StaticValue::Kind::None, {}};
        if (opts_.layout) opts_.layout->inputs.push_back({name, OnnxIoSlot::Kind::None, 0, true});
        return true;
      }
      t = &t->optional_type().elem_type();
      if (t->has_tensor_type()) {
        g.add_input(name, convert_type(*t, "input '" + name + "'"));
        if (opts_.layout) opts_.layout->inputs.push_back({name, OnnxIoSlot::Kind::Tensor, 1, true});
        return true;
      }
    }
    if (!t->has_sequence_type()) return false;  // convert_type names the type it refuses
    auto len = opts_.sequence_lengths.find(name);
    if (len == opts_.sequence_lengths.end())
      throw StaticSequenceError("graph input '" + name + "' is a sequence: Cuvil resolves sequences when the "
                                "graph is built, so its length must be given when importing "
                                "(the CLI's --sequence NAME=N; cuvil.load_onnx binds it from the list a call "
                                "gives; OnnxImportOptions::sequence_lengths)");
    CUVIL_CHECK(len->second >= 0 && len->second <= 65536, "sequence input '", name, "': length ", len->second,
                " is out of range");
    onnx::TypeProto elem = t->sequence_type().elem_type();
    CUVIL_CHECK(elem.has_tensor_type(), "sequence input '", name, "': only sequences of tensors are supported");
    // A sequence's elements may differ in shape: a named dim binds nothing across them, each gets its own symbol.
    if (elem.tensor_type().has_shape())
      for (auto& d : *elem.mutable_tensor_type()->mutable_shape()->mutable_dim())
        if (d.has_dim_param()) d.clear_dim_param();
    StaticValue v;
    for (int64_t i = 0; i < len->second; ++i) {
      std::string n = name + "_" + std::to_string(i);
      CUVIL_CHECK(!g.lookup(n), "sequence input '", name, "': its element name '", n, "' is taken");
      v.elems.push_back(g.add_input(n, convert_type(elem, "input '" + n + "'")));
    }
    statics_[name] = std::move(v);
    if (opts_.layout)
      opts_.layout->inputs.push_back({name, OnnxIoSlot::Kind::Sequence, size_t(len->second), in.type().has_optional_type()});
    return true;
  }

  // Whether a node's regions yield sequence or optional values (whose outputs were flattened into their
  // elements, region_layouts_). Only If can pass them on; its outputs are then flattened too.
  bool regions_yield_static_values(const AttrMap& attrs, const std::string& where) const {
    bool any = false;
    for (const auto& [name, a] : attrs) {
      if (a.kind() != AttrKind::Graph) continue;
      auto it = region_layouts_.find(a.g().get());
      if (it == region_layouts_.end()) continue;
      for (const OnnxIoSlot& s : it->second) any |= s.kind != OnnxIoSlot::Kind::Tensor;
    }
    (void)where;
    return any;
  }

  // An If whose branches yield sequences or optionals: both must give the same lengths (and emptiness), so that
  // the If has a fixed list of tensor outputs; each sequence output is then the list of those.
  void convert_static_if(const onnx::NodeProto& np, Graph& g, const std::vector<Value*>& inputs, AttrMap& attrs,
                         const std::vector<std::string>& outs, const Location& loc, const std::string& where) {
    auto unresolved = [&](const std::string& why) {
      throw StaticSequenceError(where + ": " + why +
                                " (Cuvil resolves sequence and optional values when the graph is built)");
    };
    if (np.op_type() != "If") unresolved("a body yields a sequence or optional value");
    auto then_it = attrs.find("then_branch"), else_it = attrs.find("else_branch");
    CUVIL_CHECK(then_it != attrs.end() && else_it != attrs.end() && then_it->second.kind() == AttrKind::Graph &&
                    else_it->second.kind() == AttrKind::Graph,
                where, ": attributes 'then_branch' and 'else_branch' (graphs) are required");
    const auto& lt = region_layouts_.at(then_it->second.g().get());
    const auto& le = region_layouts_.at(else_it->second.g().get());
    CUVIL_CHECK(lt.size() == le.size() && lt.size() >= outs.size(), where, ": the branches have ", lt.size(),
                " and ", le.size(), " outputs for ", outs.size());
    std::vector<std::string> flat;
    for (size_t i = 0; i < lt.size(); ++i) {
      if (lt[i].kind != le[i].kind || lt[i].count != le[i].count)
        unresolved("output " + std::to_string(i) + " is " +
                   (lt[i].kind == OnnxIoSlot::Kind::None ? std::string("an empty optional")
                                                         : "a " + std::to_string(lt[i].count) + "-element value") +
                   " in then_branch but " +
                   (le[i].kind == OnnxIoSlot::Kind::None ? std::string("an empty optional")
                                                         : "a " + std::to_string(le[i].count) + "-element value") +
                   " in else_branch: which one depends on the condition at run time");
      std::string base = i < outs.size() ? outs[i] : loc.name + "_out" + std::to_string(i);
      if (lt[i].kind == OnnxIoSlot::Kind::Tensor) flat.push_back(base);
      else
        for (size_t k = 0; k < lt[i].count; ++k) flat.push_back(g.unique_name(base + "_" + std::to_string(k)));
    }
    Node* n = g.add_node(OpKind::If, inputs, flat, attrs, loc);
    size_t at = 0;
    for (size_t i = 0; i < lt.size(); ++i) {
      std::string name = i < outs.size() ? outs[i] : "";
      if (lt[i].kind == OnnxIoSlot::Kind::Tensor) {
        ++at;
        continue;
      }
      StaticValue v{lt[i].kind == OnnxIoSlot::Kind::None ? StaticValue::Kind::None : StaticValue::Kind::Sequence,
                    {}};
      for (size_t k = 0; k < lt[i].count; ++k) v.elems.push_back(n->output(at++));
      if (!name.empty()) statics_[name] = std::move(v);
    }
  }

  // Converts a Loop or SequenceMap body into `g` once (static_sequences.h): its inputs bound to `args`, the names
  // it defines (here and in its own regions) prefixed apart, names from enclosing scopes kept.
  std::vector<std::string> inline_body(const onnx::GraphProto& body, const std::vector<std::string>& args, Graph& g,
                                       const std::string& hint) {
    CUVIL_CHECK(++inline_depth_ <= kMaxRegionDepth, "ONNX ", hint, ": bodies unrolled inside each other more than ",
                kMaxRegionDepth, " levels deep");
    std::unordered_map<std::string, std::string> bound;
    for (int i = 0; i < body.input_size(); ++i)
      bound[body.input(i).name()] = size_t(i) < args.size() ? args[size_t(i)] : "";
    std::unordered_set<std::string> defined;
    collect_defined(body, defined, /*top=*/true);
    // Numbered: a prefix is no value, so unique_name alone would give every iteration the same one.
    std::string prefix = g.unique_name(hint + "_body" + std::to_string(++inlined_bodies_)) + "/";
    auto mapped = [&](const std::string& name) -> std::string {
      if (name.empty()) return name;
      if (auto it = bound.find(name); it != bound.end()) return it->second;
      return defined.count(name) ? prefix + name : name;
    };
    onnx::GraphProto copy = body;
    for (auto& n : *copy.mutable_node()) n.set_name(prefix + (n.name().empty() && n.output_size() ? n.output(0) : n.name()));
    rename_graph(copy, mapped);
    for (const auto& init : copy.initializer())
      if (!g.lookup(init.name())) g.add_constant(init.name(), shared_copy(onnx_tensor_to_cuvil(&init, base_dir_)));
    for (int i : onnx_node_order(copy)) convert_node(copy.node(i), g);
    std::vector<std::string> outs;
    for (const auto& o : copy.output()) outs.push_back(o.name());
    --inline_depth_;
    return outs;
  }

  static void collect_defined(const onnx::GraphProto& gp, std::unordered_set<std::string>& defs, bool top) {
    if (!top)
      for (const auto& in : gp.input()) defs.insert(in.name());
    for (const auto& init : gp.initializer()) defs.insert(init.name());
    for (const auto& n : gp.node()) {
      for (const auto& o : n.output())
        if (!o.empty()) defs.insert(o);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) collect_defined(a.g(), defs, false);
        for (const auto& sg : a.graphs()) collect_defined(sg, defs, false);
      }
    }
  }

  template <class F>
  static void rename_graph(onnx::GraphProto& gp, const F& mapped) {
    for (auto& in : *gp.mutable_input()) in.set_name(mapped(in.name()));
    for (auto& o : *gp.mutable_output()) o.set_name(mapped(o.name()));
    for (auto& init : *gp.mutable_initializer()) init.set_name(mapped(init.name()));
    gp.clear_value_info();
    for (auto& n : *gp.mutable_node()) {
      for (auto& in : *n.mutable_input()) in = mapped(in);
      for (auto& o : *n.mutable_output()) o = mapped(o);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) rename_graph(*a.mutable_g(), mapped);
        for (auto& sg : *a.mutable_graphs()) rename_graph(sg, mapped);
      }
    }
  }

  // A node calling a model-local function (FunctionProto) is replaced by the function's body: its formal inputs
  // and outputs bound to the node's, attribute references resolved from the node's attributes, and every value inside renamed apart so that two calls do not collide.
  void inline_function(const onnx::NodeProto& call, const onnx::FunctionProto& f, Graph& g, const std::string& where) {
    CUVIL_CHECK(++inline_depth_ <= kMaxRegionDepth, where, ": functions call each other more than ",
                kMaxRegionDepth, " levels deep");
    std::unordered_map<std::string, std::string> rename;
    for (int i = 0; i < f.input_size(); ++i) rename[f.input(i)] = i < call.input_size() ? call.input(i) : "";
    for (int i = 0; i < f.output_size(); ++i) rename[f.output(i)] = i < call.output_size() ? call.output(i) : "";
    std::string prefix = g.unique_name((call.name().empty() ? f.name() : call.name()) + "_fn") + "/";
    auto mapped = [&](const std::string& name) -> std::string {
      if (name.empty()) return name;
      auto it = rename.find(name);
      return it != rename.end() ? it->second : prefix + name;
    };
    // (A function's default attribute values, FunctionProto.attribute_proto, came with IR 9: the onnx 1.12 schema
    // Cuvil parses with does not hold them, so a reference the call leaves unset leaves the attribute absent.)
    std::unordered_map<std::string, const onnx::AttributeProto*> given;
    for (const auto& a : call.attribute()) given[a.name()] = &a;
    int saved_opset = opset_;
    for (const auto& op : f.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = int(op.version());
    CUVIL_CHECK(opset_ <= kMaxOpset, where, ": function '", f.name(), "' uses opset ", opset_);
    onnx::GraphProto body;  // the body with its names bound, sorted like a graph
    for (const auto& n : f.node()) {
      onnx::NodeProto* m = body.add_node();
      *m = n;
      for (auto& in : *m->mutable_input()) in = mapped(in);
      for (auto& out : *m->mutable_output()) out = mapped(out);
      if (m->name().empty() && m->output_size()) m->set_name(m->output(0));
      else if (!m->name().empty()) m->set_name(prefix + m->name());
      m->clear_attribute();
      for (const auto& a : n.attribute()) {
        if (a.ref_attr_name().empty()) {
          *m->add_attribute() = a;
          continue;
        }
        const onnx::AttributeProto* src = given.count(a.ref_attr_name()) ? given[a.ref_attr_name()] : nullptr;
        if (!src) continue;
        onnx::AttributeProto* r = m->add_attribute();
        *r = *src;
        r->set_name(a.name());
      }
    }
    for (int i : onnx_node_order(body)) convert_node(body.node(i), g);
    opset_ = saved_opset;
    --inline_depth_;
  }

  // Constant nodes become constant values; the IR has no Constant op.
  void convert_constant(const onnx::NodeProto& np, Graph& g, AttrMap& attrs, const std::vector<std::string>& outs,
                        const std::string& where) {
    CUVIL_CHECK(outs.size() == 1 && attrs.size() == 1, where, ": expected one output and one value attribute");
    auto& [name, a] = *attrs.begin();
    Tensor t;
    if (name == "value") t = a.t();
    else if (name == "value_float") t = Tensor::scalar<float>(float(a.f()));
    else if (name == "value_int") t = Tensor::scalar<int64_t>(a.i());
    else if (name == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      t = Tensor::from_vector<float>(v, {int64_t(v.size())});
    } else if (name == "value_ints") {
      t = Tensor::from_vector<int64_t>(a.ints(), {int64_t(a.ints().size())});
    } else {
      fail(where, ": unsupported Constant attribute '", name, "'");
    }
    (void)np;
    g.add_constant(outs[0], std::move(t));
  }

  // Initializers with the same dtype, dims and bytes (tied weights, exporters' repeated constants) share one
  // storage: the model holds them once. Tensors are immutable once they are constants, so sharing is safe.
  Tensor shared_copy(Tensor t) {
    if (t.nbytes() < 256) return t;
    std::string_view bytes(static_cast<const char*>(t.raw()), t.nbytes());
    std::string key = t.type_str() + "#" + std::to_string(std::hash<std::string_view>()(bytes));
    auto [it, fresh] = by_content_.emplace(key, t);
    if (!fresh && it->second.same_bytes(t)) return it->second;
    return t;
  }

  ExternalDataDir base_dir_;  // where external data is read from (onnx_tensor_to_cuvil's overload above)
  int opset_ = 0;
  bool default_imported_ = true;
  std::unordered_map<std::string, int> domain_opsets_;  // imported operator sets by domain ("" = ai.onnx)
  std::unordered_map<std::string, const onnx::FunctionProto*> functions_;  // model-local functions, "domain:name"
  std::unordered_map<std::string, Tensor> by_content_;
  int inline_depth_ = 0;
  int inlined_bodies_ = 0;
  const OnnxImportOptions& opts_;
  StaticValues statics_;  // sequence and optional values by ONNX name (static_sequences.h)
  std::unordered_set<std::string> from_sequences_;  // outputs of the nodes static_sequences.h converted
  std::unordered_map<const Graph*, std::vector<OnnxIoSlot>> region_layouts_;  // regions' outputs, flattened
};

std::shared_ptr<Graph> finish(std::shared_ptr<Graph> g, const OnnxImportOptions& opts) {
  if (opts.infer_and_verify) {
    infer_shapes(*g);
    verify(*g);
  }
  return g;
}

}  // namespace

namespace {

std::shared_ptr<Graph> import_bytes(const void* data, size_t size, ExternalDataDir ext, const OnnxImportOptions& opts) {
  CUVIL_CHECK(size <= size_t(INT32_MAX), "ONNX file is larger than 2 GiB; store weights as external data");
  onnx::ModelProto m;
  // Each level of region nesting is three protobuf messages deep (GraphProto > NodeProto > AttributeProto), so
  // protobuf's default limit of 100 refused 33 nested Ifs as unparsable: room for Cuvil's own nesting limit
  // (kMaxRegionDepth, whose error names the node) and a few levels more.
  google::protobuf::io::ArrayInputStream bytes(data, int(size));
  google::protobuf::io::CodedInputStream in(&bytes);
  in.SetRecursionLimit(3 * (kMaxRegionDepth + 2) + 8);
  CUVIL_CHECK(m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage(),
              "not a valid ONNX model: the protobuf cannot be parsed (truncated or corrupt file, or regions nested ",
              "far deeper than the limit of ", kMaxRegionDepth, "?)");
  Importer importer(std::move(ext), opts);
  std::shared_ptr<Graph> g = importer.import_model(m);
  if (!g) return nullptr;  // (stop_at_unbound_sequences)
  if (opts.infer_and_verify) importer.retarget_declared(inline_shape_decided_ifs(*g));
  g = finish(std::move(g), opts);
  if (opts.infer_and_verify) importer.check_declared_types();
  return g;
}

}  // namespace

std::shared_ptr<Graph> import_onnx_bytes(const void* data, size_t size, const std::string& base_dir,
                                         const OnnxImportOptions& opts) {
  return import_bytes(data, size, ExternalDataDir{base_dir, {}}, opts);
}

std::shared_ptr<Graph> import_onnx_file(const std::string& path, const OnnxImportOptions& opts) {
  RegularFile f = RegularFile::open(path, "model");
  std::string bytes = read_onnx_file(f);
  ExternalDataDir ext;
  ext.dir = std::filesystem::path(path).parent_path().string();
  if (ext.dir.empty()) ext.dir = ".";
  try {
    // The roots external data must really lie under: the directory as named, and the model file's own.
    ext.real_roots.push_back(real_path_of(ext.dir, "model directory"));
    std::string model_dir = std::filesystem::path(f.real_path()).parent_path().string();
    if (model_dir != ext.real_roots[0]) ext.real_roots.push_back(model_dir);
    return import_bytes(bytes.data(), bytes.size(), std::move(ext), opts);
  } catch (const StaticSequenceError& e) {
    throw StaticSequenceError(path + ": " + e.what());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace cuvil

namespace cuvil {

Tensor read_onnx_tensor_file(const std::string& path) {
  std::string bytes = read_onnx_file(RegularFile::open(path, "TensorProto file"));
  onnx::TensorProto tp;
  CUVIL_CHECK(tp.ParseFromString(bytes), path, ": not a valid serialized TensorProto");
  std::string dir = std::filesystem::path(path).parent_path().string();
  return onnx_tensor_to_cuvil(&tp, dir);
}

}  // namespace cuvil
