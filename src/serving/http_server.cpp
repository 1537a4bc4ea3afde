#include "serving/http_server.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include <sys/socket.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "serving/http_connection.h"
#include "serving/inference.h"
#include "serving/protocol.h"

namespace cuvil::serving {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Request start time and model, for the access log (set and read on the connection's own thread).
thread_local Clock::time_point t_start;
thread_local std::string t_model;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content(error_body(message), "application/json");
}

void send_json(httplib::Response& res, const json& j) { res.set_content(dump(j), "application/json"); }

json tensor_metadata(const std::vector<TensorSpec>& specs) {
  json a = json::array();
  for (const TensorSpec& s : specs) {
    json shape = json::array();
    if (s.rank_known)
      for (int64_t d : s.shape) shape.push_back(d);
    else
      shape.push_back(-1);
    a.push_back({{"name", s.name}, {"datatype", v2_datatype(s.dtype)}, {"shape", shape}});
  }
  return a;
}

std::string version_of(const httplib::Request& req) { return req.matches.size() > 2 ? req.matches[2].str() : ""; }

}  // namespace

HttpServer::HttpServer(ModelRepository& repo, Metrics& metrics, HttpOptions options)
    : repo_(repo), metrics_(metrics), options_(std::move(options)) {
  // CUVIL_SERVE_PLAIN_HTTPLIB=1: cpp-httplib's own per-request streams, for comparisons.
  const char* plain = std::getenv("CUVIL_SERVE_PLAIN_HTTPLIB");
  if (plain && std::string_view(plain) == "1") server_ = std::make_unique<httplib::Server>();
  else server_ = std::make_unique<BufferedHttpServer>();
  auto& s = *server_;
  size_t threads = size_t(std::max(1, options_.max_connections));
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(options_.max_request_bytes);
  s.set_read_timeout(options_.read_timeout);
  s.set_write_timeout(options_.write_timeout);
  s.set_keep_alive_timeout(options_.keep_alive_timeout.count());
  s.set_keep_alive_max_count(1u << 30);  // load generators keep one connection for their whole run
  s.set_tcp_nodelay(true);
  s.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd_ = int(sock);
  });
  routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    CUVIL_CHECK(port_ > 0, "cannot bind HTTP on ", options_.host);
  } else {
    CUVIL_CHECK(server_->bind_to_port(options_.host, options_.port), "cannot bind HTTP on ", options_.host, ":",
                options_.port, " (in use?)");
    port_ = options_.port;
  }
  // cpp-httplib listens with a backlog of 5: more clients connecting at once had their SYNs dropped and
  // retried a second later (wrk's 32 connections: p99 ~0.8-1 s). listen() again sets the backlog.
  if (listen_fd_ >= 0) ::listen(listen_fd_, SOMAXCONN);
  return port_;
}

void HttpServer::serve() { server_->listen_after_bind(); }
void HttpServer::stop() { server_->stop(); }

void HttpServer::routes() {
  auto& s = *server_;
  s.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    t_start = Clock::now();
    t_model.clear();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // httplib's own rejections (413 too large, 400 bad HTTP, 404 no route) get a body in the protocol's form.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg = res.status == 413   ? "the request is larger than the server's limit"
                      : res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                      : res.status == 408 ? "the request was not received in time"
                                          : "the request was rejected (HTTP " + std::to_string(res.status) + ")";
    res.set_content(error_body(msg), "application/json");
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ProtocolError& e) {
      send_error(res, e.status(), e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, std::string("internal error: ") + e.what());
    } catch (...) {
      send_error(res, 500, "internal error");
    }
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.http_requests(res.status).Increment();
    if (!options_.access_log) return;
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start).count();
    auto now = std::chrono::system_clock::now();
    json line = {{"ts", std::chrono::duration<double>(now.time_since_epoch()).count()},
                 {"remote", req.remote_addr},
                 {"method", req.method},
                 {"path", req.path},
                 {"status", res.status},
                 {"bytes_in", req.body.size()},
                 {"bytes_out", res.body.size()},
                 {"ms", std::round(ms * 1000) / 1000}};
    if (!t_model.empty()) line["model"] = t_model;
    std::string text = dump(line) + "\n";
    std::lock_guard lock(log_mu_);
    std::fwrite(text.data(), 1, text.size(), options_.access_log);
    std::fflush(options_.access_log);
  });

  s.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  s.Get("/v2/health/ready", [this](const httplib::Request&, httplib::Response& res) { res.status = ready_ ? 200 : 503; });
  s.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"name", "cuvil"},
                    {"version", CUVIL_VERSION},
                    {"extensions", {"binary_tensor_data", "model_repository"}}});
  });

  const std::string model = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";
  s.Get(model + "/ready", [this](const httplib::Request& req, httplib::Response& res) {
    res.status = repo_.get(req.matches[1], version_of(req)) ? 200 : 400;
  });
  auto loaded = [this](const httplib::Request& req) {
    std::string name = req.matches[1], version = version_of(req);
    t_model = name;
    auto m = repo_.get(name, version);
    if (!m)
      throw ProtocolError(404, "unknown model '" + name + "'" + (version.empty() ? "" : " version " + version) +
                                   " (or it is not loaded)");
    return m;
  };
  s.Get(model, [loaded](const httplib::Request& req, httplib::Response& res) {
    auto m = loaded(req);
    send_json(res, {{"name", m->name},
                    {"versions", {m->version}},
                    {"platform", "cuvil"},
                    {"inputs", tensor_metadata(m->model().inputs())},
                    {"outputs", tensor_metadata(m->model().outputs())}});
  });
  s.Get(model + "/config", [loaded](const httplib::Request& req, httplib::Response& res) {
    auto m = loaded(req);
    const ModelConfig& c = m->config;
    send_json(res, {{"name", m->name},
                    {"platform", "cuvil"},
                    {"max_batch_size", c.batcher.max_batch_size},
                    {"dynamic_batching",
                     {{"max_queue_delay_microseconds", c.batcher.max_queue_delay.count()},
                      {"max_queue_size", c.batcher.max_queue_size}}},
                    {"instance_group", {{{"count", c.model.instances}, {"kind", "KIND_CPU"}}}},
                    {"input", tensor_metadata(m->model().inputs())},
                    {"output", tensor_metadata(m->model().outputs())}});
  });
  s.Post(model + "/infer", [this, loaded](const httplib::Request& req, httplib::Response& res) {
    auto m = loaded(req);
    ModelMetrics& mm = metrics_.model(m->name);
    std::optional<size_t> header_length;
    if (req.has_header("Inference-Header-Content-Length")) {
      std::string v = req.get_header_value("Inference-Header-Content-Length");
      size_t n = 0;
      auto r = std::from_chars(v.data(), v.data() + v.size(), n);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size()) {
        mm.failure->Increment();
        throw ProtocolError(400, "Inference-Header-Content-Length '" + v + "' is not a byte count");
      }
      header_length = n;
    }
    InferRequest ir;
    try {
      ir = parse_infer_request(req.body, header_length);
    } catch (...) {
      mm.failure->Increment();
      throw;
    }
    std::string version;
    std::vector<Tensor> outputs = run_request(*m, ir, mm, &version);
    EncodedResponse out = encode_infer_response(m->name, version, ir, m->model().outputs(), outputs);
    if (out.header_length) {
      res.set_header("Inference-Header-Content-Length", std::to_string(*out.header_length));
      res.set_content(std::move(out.body), "application/octet-stream");
    } else {
      res.set_content(std::move(out.body), "application/json");
    }
  });

  // The model repository extension.
  s.Post("/v2/repository/index", [this](const httplib::Request&, httplib::Response& res) {
    json a = json::array();
    for (const ModelState& m : repo_.index()) {
      json e = {{"name", m.name}, {"state", m.state}};
      if (!m.version.empty()) e["version"] = m.version;
      if (!m.reason.empty()) e["reason"] = m.reason;
      a.push_back(e);
    }
    send_json(res, a);
  });
  s.Post(R"(/v2/repository/models/([^/]+)/load)", [this](const httplib::Request& req, httplib::Response& res) {
    t_model = req.matches[1];
    // Triton's parameters: "file:<version>/model.cuv" (base64) upload a new version, "config" replaces
    // config.json; without them the repository's files are loaded as they are.
    std::vector<std::pair<std::string, std::string>> files;
    std::optional<std::string> config;
    if (!req.body.empty()) {
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) throw ProtocolError(400, "the load request is not a JSON object");
      if (body.contains("parameters")) {
        const json& ps = body["parameters"];
        if (!ps.is_object()) throw ProtocolError(400, "'parameters' must be an object");
        for (const auto& item : ps.items()) {
          const std::string& k = item.key();
          if (k == "config" || k.starts_with("file:")) {
            if (!item.value().is_string()) throw ProtocolError(400, "parameter '" + k + "' must be a string");
            if (k == "config") config = item.value().get<std::string>();
            else files.emplace_back(k.substr(5), base64_decode(item.value().get<std::string>()));
          }
        }
      }
      if (config && files.empty())
        throw ProtocolError(400, "a 'config' parameter needs the model's files ('file:<version>/model.cuv')");
    }
    try {
      if (files.empty()) repo_.load(req.matches[1]);
      else repo_.load_files(req.matches[1], files, config);
    } catch (const ProtocolError&) {
      throw;
    } catch (const std::exception& e) {
      throw ProtocolError(400, std::string("failed to load: ") + e.what());
    }
    res.status = 200;
  });
  s.Post(R"(/v2/repository/models/([^/]+)/unload)", [this](const httplib::Request& req, httplib::Response& res) {
    t_model = req.matches[1];
    repo_.unload(req.matches[1]);
    res.status = 200;
  });
}

MetricsServer::MetricsServer(Metrics& metrics, std::string host, int port)
    : metrics_(metrics), host_(std::move(host)), port_(port), server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.serialize(), "text/plain; version=0.0.4");
  });
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::bind() {
  if (port_ == 0) {
    port_ = server_->bind_to_any_port(host_);
    CUVIL_CHECK(port_ > 0, "cannot bind metrics on ", host_);
  } else {
    CUVIL_CHECK(server_->bind_to_port(host_, port_), "cannot bind metrics on ", host_, ":", port_, " (in use?)");
  }
  return port_;
}

void MetricsServer::serve() { server_->listen_after_bind(); }
void MetricsServer::stop() { server_->stop(); }

}  // namespace cuvil::serving
