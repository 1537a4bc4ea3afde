#include "serving/grpc_server.h"

#include <algorithm>
#include <cstring>

#include <grpcpp/grpcpp.h>

#include "kserve_v2.grpc.pb.h"
#include "serving/inference.h"
#include "serving/protocol.h"

namespace cuvil::serving {
namespace {

namespace pb = ::inference;

grpc::Status to_status(const ProtocolError& e) {
  grpc::StatusCode code = e.status() == 404   ? grpc::StatusCode::NOT_FOUND
                          : e.status() == 503 ? grpc::StatusCode::UNAVAILABLE
                          : e.status() == 413 ? grpc::StatusCode::RESOURCE_EXHAUSTED
                          : e.status() < 500  ? grpc::StatusCode::INVALID_ARGUMENT
                                              : grpc::StatusCode::INTERNAL;
  return grpc::Status(code, e.what());
}

// Runs `fn`, mapping errors to gRPC statuses the way REST maps them to HTTP codes.
template <class Fn>
grpc::Status guarded(Fn&& fn) {
  try {
    fn();
    return grpc::Status::OK;
  } catch (const ProtocolError& e) {
    return to_status(e);
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
  }
}

[[noreturn]] void bad(const std::string& msg) { throw ProtocolError(400, msg); }

// Typed contents -> tensor elements, with the range checks JSON gets.
template <class T, class Src>
void copy_checked(const Src& src, Tensor& t, const std::string& what) {
  if (int64_t(src.size()) != t.numel())
    bad(what + ": " + std::to_string(src.size()) + " elements for shape " + shape_str(t.shape()));
  T* p = t.data<T>();
  for (int i = 0; i < src.size(); ++i) {
    auto v = src.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
      if (v < decltype(v)(std::numeric_limits<T>::min()) || v > decltype(v)(std::numeric_limits<T>::max()))
        bad(what + ": " + std::to_string(v) + " is out of range");
    p[i] = T(v);
  }
}

Tensor typed_input(const pb::InferTensorContents& c, DType dtype, const std::vector<int64_t>& shape,
                   const std::string& what) {
  Tensor t = Tensor::zeros(dtype, shape);
  switch (dtype) {
    case DType::boolean: copy_checked<bool>(c.bool_contents(), t, what); break;
    case DType::i8: copy_checked<int8_t>(c.int_contents(), t, what); break;
    case DType::i16: copy_checked<int16_t>(c.int_contents(), t, what); break;
    case DType::i32: copy_checked<int32_t>(c.int_contents(), t, what); break;
    case DType::i64: copy_checked<int64_t>(c.int64_contents(), t, what); break;
    case DType::u8: copy_checked<uint8_t>(c.uint_contents(), t, what); break;
    case DType::u16: copy_checked<uint16_t>(c.uint_contents(), t, what); break;
    case DType::u32: copy_checked<uint32_t>(c.uint_contents(), t, what); break;
    case DType::u64: copy_checked<uint64_t>(c.uint64_contents(), t, what); break;
    case DType::f32: copy_checked<float>(c.fp32_contents(), t, what); break;
    case DType::f64: copy_checked<double>(c.fp64_contents(), t, what); break;
    default: bad(what + ": " + v2_datatype(dtype) + " data must be sent in raw_input_contents");
  }
  return t;
}

InferRequest from_proto(const pb::ModelInferRequest& r) {
  InferRequest ir;
  ir.id = r.id();
  bool raw = r.raw_input_contents_size() > 0;
  if (raw && r.raw_input_contents_size() != r.inputs_size())
    bad("raw_input_contents has " + std::to_string(r.raw_input_contents_size()) + " entries for " +
        std::to_string(r.inputs_size()) + " inputs");
  for (int i = 0; i < r.inputs_size(); ++i) {
    const auto& in = r.inputs(i);
    std::string what = "input '" + in.name() + "'";
    for (const std::string& seen : ir.input_names)
      if (seen == in.name()) bad(what + " is given twice");
    if (in.datatype() == "BYTES") bad(what + ": BYTES tensors are not supported (Cuvil models take numeric tensors)");
    std::optional<DType> dtype = dtype_from_v2(in.datatype());
    if (!dtype) bad(what + ": unknown datatype '" + in.datatype() + "'");
    std::vector<int64_t> shape(in.shape().begin(), in.shape().end());
    if (shape.size() > 32) bad(what + ": rank " + std::to_string(shape.size()) + " is too large");
    int64_t numel = 1;
    for (int64_t d : shape) {
      if (d < 0) bad(what + ": negative dim in shape " + shape_str(shape));
      if (d != 0 && numel > (int64_t(1) << 40) / d) bad(what + ": shape " + shape_str(shape) + " is too large");
      numel *= d;
    }
    Tensor t;
    if (raw) {
      const std::string& bytes = r.raw_input_contents(i);
      size_t nbytes = size_t(numel) * dtype_size(*dtype);
      if (bytes.size() != nbytes)
        bad(what + ": " + std::to_string(bytes.size()) + " raw bytes for shape " + shape_str(shape) + " of " +
            in.datatype() + " (" + std::to_string(nbytes) + " expected)");
      t = Tensor::zeros(*dtype, shape);
      if (nbytes) std::memcpy(t.raw(), bytes.data(), nbytes);
      if (*dtype == DType::boolean)
        for (size_t k = 0; k < nbytes; ++k)
          if (static_cast<const uint8_t*>(t.raw())[k] > 1) bad(what + ": BOOL bytes must be 0 or 1");
    } else {
      t = typed_input(in.contents(), *dtype, shape, what);
    }
    ir.input_names.push_back(in.name());
    ir.inputs.push_back(std::move(t));
  }
  for (const auto& o : r.outputs()) {
    if (o.parameters().count("classification")) bad("output '" + o.name() + "': classification is not supported");
    ir.outputs.push_back({o.name(), true});
  }
  return ir;
}

void fill_metadata(google::protobuf::RepeatedPtrField<pb::ModelMetadataResponse::TensorMetadata>* out,
                   const std::vector<TensorSpec>& specs) {
  for (const TensorSpec& s : specs) {
    auto* t = out->Add();
    t->set_name(s.name);
    t->set_datatype(v2_datatype(s.dtype));
    if (s.rank_known)
      for (int64_t d : s.shape) t->add_shape(d);
    else
      t->add_shape(-1);
  }
}

class Service final : public pb::GRPCInferenceService::Service {
 public:
  Service(ModelRepository& repo, Metrics& metrics) : repo_(repo), metrics_(metrics) {}
  std::atomic<bool> ready{false};

  grpc::Status ServerLive(grpc::ServerContext*, const pb::ServerLiveRequest*, pb::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const pb::ServerReadyRequest*, pb::ServerReadyResponse* r) override {
    r->set_ready(ready);
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const pb::ModelReadyRequest* q, pb::ModelReadyResponse* r) override {
    r->set_ready(repo_.get(q->name(), q->version()) != nullptr);
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const pb::ServerMetadataRequest*,
                              pb::ServerMetadataResponse* r) override {
    r->set_name("cuvil");
    r->set_version(CUVIL_VERSION);
    r->add_extensions("model_repository");
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const pb::ModelMetadataRequest* q,
                             pb::ModelMetadataResponse* r) override {
    return guarded([&] {
      auto m = loaded(q->name(), q->version());
      r->set_name(m->name);
      r->add_versions(m->version);
      r->set_platform("cuvil");
      fill_metadata(r->mutable_inputs(), m->model().inputs());
      fill_metadata(r->mutable_outputs(), m->model().outputs());
    });
  }
  grpc::Status ModelInfer(grpc::ServerContext*, const pb::ModelInferRequest* q, pb::ModelInferResponse* r) override {
    return guarded([&] {
      auto m = loaded(q->model_name(), q->model_version());
      ModelMetrics& mm = metrics_.model(m->name);
      InferRequest ir;
      try {
        ir = from_proto(*q);
      } catch (...) {
        mm.failure->Increment();
        throw;
      }
      std::string version;
      std::vector<Tensor> outputs = run_request(*m, ir, mm, &version);
      r->set_model_name(m->name);
      r->set_model_version(version);
      r->set_id(q->id());
      const auto& specs = m->model().outputs();
      for (size_t k = 0; k < specs.size(); ++k) {
        bool wanted = ir.outputs.empty();
        for (const RequestedOutput& o : ir.outputs) wanted |= o.name == specs[k].name;
        if (!wanted) continue;
        const Tensor& t = outputs[k];
        auto* o = r->add_outputs();
        o->set_name(specs[k].name);
        o->set_datatype(v2_datatype(t.dtype()));
        for (int64_t d : t.shape()) o->add_shape(d);
        r->add_raw_output_contents(static_cast<const char*>(t.raw()), t.nbytes());
      }
    });
  }
  grpc::Status RepositoryIndex(grpc::ServerContext*, const pb::RepositoryIndexRequest* q,
                               pb::RepositoryIndexResponse* r) override {
    for (const ModelState& s : repo_.index()) {
      if (q->ready() && s.state != "READY") continue;
      auto* m = r->add_models();
      m->set_name(s.name);
      m->set_version(s.version);
      m->set_state(s.state);
      m->set_reason(s.reason);
    }
    return grpc::Status::OK;
  }
  grpc::Status RepositoryModelLoad(grpc::ServerContext*, const pb::RepositoryModelLoadRequest* q,
                                   pb::RepositoryModelLoadResponse*) override {
    return guarded([&] {
      std::vector<std::pair<std::string, std::string>> files;
      std::optional<std::string> config;
      for (const auto& [k, v] : q->parameters()) {
        if (k == "config") {
          if (v.parameter_choice_case() != pb::ModelRepositoryParameter::kStringParam)
            throw ProtocolError(400, "parameter 'config' must be a string");
          config = v.string_param();
        } else if (k.starts_with("file:")) {
          if (v.parameter_choice_case() != pb::ModelRepositoryParameter::kBytesParam)
            throw ProtocolError(400, "parameter '" + k + "' must be bytes");
          files.emplace_back(k.substr(5), v.bytes_param());
        }
      }
      std::sort(files.begin(), files.end());  // (a map's order is unspecified: errors name files alike)
      if (config && files.empty())
        throw ProtocolError(400, "a 'config' parameter needs the model's files ('file:<version>/model.cuv')");
      try {
        if (files.empty()) repo_.load(q->model_name());
        else repo_.load_files(q->model_name(), files, config);
      } catch (const ProtocolError&) {
        throw;
      } catch (const std::exception& e) {
        throw ProtocolError(400, std::string("failed to load: ") + e.what());
      }
    });
  }
  grpc::Status RepositoryModelUnload(grpc::ServerContext*, const pb::RepositoryModelUnloadRequest* q,
                                     pb::RepositoryModelUnloadResponse*) override {
    return guarded([&] { repo_.unload(q->model_name()); });
  }

 private:
  std::shared_ptr<LoadedModel> loaded(const std::string& name, const std::string& version) {
    auto m = repo_.get(name, version);
    if (!m)
      throw ProtocolError(404, "unknown model '" + name + "'" + (version.empty() ? "" : " version " + version) +
                                   " (or it is not loaded)");
    return m;
  }
  ModelRepository& repo_;
  Metrics& metrics_;
};

}  // namespace

struct GrpcServer::Impl {
  Service service;
  std::string host;
  int port;
  size_t max_message_bytes;
  std::unique_ptr<grpc::Server> server;
  Impl(ModelRepository& repo, Metrics& metrics, std::string h, int p, size_t max)
      : service(repo, metrics), host(std::move(h)), port(p), max_message_bytes(max) {}
};

GrpcServer::GrpcServer(ModelRepository& repo, Metrics& metrics, std::string host, int port, size_t max_message_bytes)
    : impl_(std::make_unique<Impl>(repo, metrics, std::move(host), port, max_message_bytes)) {}

GrpcServer::~GrpcServer() { stop(); }

int GrpcServer::start() {
  grpc::ServerBuilder b;
  int bound = 0;
  b.AddListeningPort(impl_->host + ":" + std::to_string(impl_->port), grpc::InsecureServerCredentials(), &bound);
  b.RegisterService(&impl_->service);
  b.SetMaxReceiveMessageSize(int(std::min<size_t>(impl_->max_message_bytes, INT32_MAX)));
  b.SetMaxSendMessageSize(INT32_MAX);
  impl_->server = b.BuildAndStart();
  CUVIL_CHECK(impl_->server && bound > 0, "cannot bind gRPC on ", impl_->host, ":", impl_->port, " (in use?)");
  return bound;
}

void GrpcServer::stop() {
  if (impl_->server) {
    impl_->server->Shutdown();  // waits for the calls in progress
    impl_->server.reset();
  }
}

void GrpcServer::set_ready(bool ready) { impl_->service.ready = ready; }

}  // namespace cuvil::serving
