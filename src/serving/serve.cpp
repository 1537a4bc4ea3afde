#include "serving/serve.h"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include <pthread.h>

#include "serving/grpc_server.h"
#include "serving/http_server.h"

namespace cuvil::serving {
namespace {

constexpr const char* kUsage =
    "usage: cuvil serve --model-repository DIR [--host ADDR] [--http-port N] [--grpc-port N] [--metrics-port N]\n"
    "                   [--poll-repository SECONDS] [--access-log FILE|-] [--max-request-bytes N]\n"
    "                   [--max-connections N] [--read-timeout SECONDS]\n"
    "Serves every model in DIR (DIR/<model>/<version>/model.cuv|.onnx|.cvir, DIR/<model>/config.json) over the\n"
    "KServe v2 protocol (REST and gRPC). Port 0 picks a free port; the ports in use are printed on stdout once ready.\n"
    "SIGINT/SIGTERM stop accepting, finish the requests in flight and exit.\n";

struct ServeArgs {
  std::string repository, host = "0.0.0.0", access_log;
  int http_port = 8000, grpc_port = 8001, metrics_port = 8002;
  int poll_seconds = 0, max_connections = 64, read_timeout = 30;
  size_t max_request_bytes = 256u << 20;
};

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  CUVIL_CHECK(used == v.size() && n >= lo && n <= hi, flag, " needs an integer in [", lo, ", ", hi, "], got '", v, "'");
  return int(n);
}

ServeArgs parse(int argc, char** argv) {
  ServeArgs a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto value = [&]() -> std::string {
      CUVIL_CHECK(i + 1 < argc, f, " needs a value");
      return argv[++i];
    };
    if (f == "--model-repository") a.repository = value();
    else if (f == "--host") a.host = value();
    else if (f == "--http-port") a.http_port = to_int(f, value(), 0, 65535);
    else if (f == "--grpc-port") a.grpc_port = to_int(f, value(), 0, 65535);
    else if (f == "--metrics-port") a.metrics_port = to_int(f, value(), 0, 65535);
    else if (f == "--poll-repository") a.poll_seconds = to_int(f, value(), 0, 86400);
    else if (f == "--access-log") a.access_log = value();
    else if (f == "--max-request-bytes") a.max_request_bytes = size_t(to_int(f, value(), 1024, 2000000000));
    else if (f == "--max-connections") a.max_connections = to_int(f, value(), 1, 4096);
    else if (f == "--read-timeout") a.read_timeout = to_int(f, value(), 1, 3600);
    else if (f == "--help" || f == "-h") throw std::invalid_argument("help");
    else fail("unknown option '", f, "'");
  }
  CUVIL_CHECK(!a.repository.empty(), "--model-repository DIR is required");
  return a;
}

}  // namespace

int serve_main(int argc, char** argv) {
  ServeArgs a;
  try {
    a = parse(argc, argv);
  } catch (const std::invalid_argument&) {
    std::cout << kUsage;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cuvil serve: " << e.what() << "\n" << kUsage;
    return 2;
  }
  // Signals go to the thread that waits for them, not to a worker in the middle of a request.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hung up is an error on its socket, not the end of the server

  try {
    std::FILE* log = nullptr;
    if (a.access_log == "-") log = stdout;
    else if (!a.access_log.empty()) {
      log = std::fopen(a.access_log.c_str(), "a");
      CUVIL_CHECK(log, "cannot open access log '", a.access_log, "'");
    }
    Metrics metrics;
    ModelRepository repo(a.repository, metrics);
    HttpOptions ho;
    ho.host = a.host;
    ho.port = a.http_port;
    ho.max_request_bytes = a.max_request_bytes;
    ho.max_connections = a.max_connections;
    ho.read_timeout = std::chrono::seconds(a.read_timeout);
    ho.write_timeout = std::chrono::seconds(a.read_timeout);
    ho.access_log = log;
    HttpServer http(repo, metrics, ho);
    MetricsServer metrics_server(metrics, a.host, a.metrics_port);
    int http_port = http.bind();
    int metrics_port = metrics_server.bind();
    GrpcServer grpc(repo, metrics, a.host, a.grpc_port, a.max_request_bytes);
    int grpc_port = grpc.start();
    std::thread http_thread([&] { http.serve(); });
    std::thread metrics_thread([&] { metrics_server.serve(); });
    // Live at once (the health endpoint answers), ready once the models have loaded.
    int failed = repo.load_all();
    http.set_ready(true);
    grpc.set_ready(true);
    std::cout << "cuvil serve: ready: http " << http_port << " grpc " << grpc_port << " metrics " << metrics_port << " ("
              << repo.index().size() - failed << " models loaded, " << failed << " failed)" << std::endl;

    std::atomic<bool> stopping{false};
    std::thread poller;
    if (a.poll_seconds > 0)
      poller = std::thread([&] {
        while (!stopping) {
          for (int i = 0; i < a.poll_seconds * 10 && !stopping; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          if (!stopping) repo.poll_changes();
        }
      });
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::cerr << "cuvil serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": draining" << std::endl;
    stopping = true;
    http.set_ready(false);
    grpc.set_ready(false);
    if (poller.joinable()) poller.join();
    repo.drain();  // queued requests run now (no batch delay), new ones are rejected with 503
    http.stop();   // stops accepting; serve() returns once the requests in progress are answered
    http_thread.join();
    grpc.stop();
    metrics_server.stop();
    metrics_thread.join();
    if (log && log != stdout) std::fclose(log);
    std::cerr << "cuvil serve: stopped" << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cuvil serve: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace cuvil::serving
