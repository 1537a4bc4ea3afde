// The KServe v2 REST endpoints over cpp-httplib (one thread per connection from a bounded pool), and the
// Prometheus /metrics endpoint on its own port.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "serving/metrics.h"
#include "serving/model_repository.h"

namespace httplib {
class Server;
}

namespace cuvil::serving {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8000;                   // 0: any free port (port() tells which)
  size_t max_request_bytes = 256u << 20;
  int max_connections = 64;          // connections served at once; more wait for a free thread
  std::chrono::seconds read_timeout{30}, write_timeout{30}, keep_alive_timeout{5};
  std::FILE* access_log = nullptr;   // one JSON line per request, or none
};

class HttpServer {
 public:
  HttpServer(ModelRepository& repo, Metrics& metrics, HttpOptions options);
  ~HttpServer();
  // Binds the port (throws cuvil::Error when it cannot); serve() then answers until stop().
  int bind();
  void serve();
  // Stops accepting; requests in progress finish and are answered before serve() returns.
  void stop();
  void set_ready(bool ready) { ready_ = ready; }
  int port() const { return port_; }

 private:
  void routes();
  ModelRepository& repo_;
  Metrics& metrics_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::atomic<bool> ready_{false};
  int port_ = 0;
  int listen_fd_ = -1;  // (the listening socket, to widen its backlog past cpp-httplib's 5)
  std::mutex log_mu_;
};

// GET /metrics on its own port.
class MetricsServer {
 public:
  MetricsServer(Metrics& metrics, std::string host, int port);
  ~MetricsServer();
  int bind();
  void serve();
  void stop();

 private:
  Metrics& metrics_;
  std::string host_;
  int port_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace cuvil::serving
