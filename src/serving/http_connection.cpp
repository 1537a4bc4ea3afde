#include "serving/http_connection.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace cuvil::serving {
namespace {

// Writes collect up to this many bytes before they go out; a larger piece is sent as it comes.
constexpr size_t kWriteBuffer = 64 * 1024;
constexpr size_t kReadBuffer = 16 * 1024;

void address_of(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  int r = peer ? ::getpeername(sock, reinterpret_cast<sockaddr*>(&addr), &len)
               : ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  if (r != 0) return;
  if (addr.ss_family == AF_INET) port = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  else if (addr.ss_family == AF_INET6) port = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  else return;
  char host[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) == 0)
    ip = host;
}

class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(socket_t sock, int read_timeout_ms) : sock_(sock), read_timeout_ms_(read_timeout_ms) {
    in_.resize(kReadBuffer);
    out_.reserve(4096);
  }

  bool is_readable() const override { return rpos_ < rend_ || wait(POLLIN, read_timeout_ms_) > 0; }
  bool is_writable() const override { return !broken_; }

  ssize_t read(char* ptr, size_t size) override {
    if (rpos_ == rend_) {
      if (!flush()) return -1;  // (a reply the client waits for before it sends more: 100 Continue)
      if (size >= in_.size()) return receive(ptr, size);
      ssize_t n = receive(in_.data(), in_.size());
      if (n <= 0) return n;
      rpos_ = 0;
      rend_ = size_t(n);
    }
    size_t n = std::min(size, rend_ - rpos_);
    std::memcpy(ptr, in_.data() + rpos_, n);
    rpos_ += n;
    return ssize_t(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (broken_) return -1;
    if (out_.size() + size > kWriteBuffer) {
      if (!flush()) return -1;
      if (size > kWriteBuffer) return send_all(ptr, size) ? ssize_t(size) : -1;
    }
    out_.append(ptr, size);
    return ssize_t(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    if (!remote_known_) {
      address_of(sock_, true, remote_ip_, remote_port_);
      remote_known_ = true;
    }
    ip = remote_ip_;
    port = remote_port_;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    if (!local_known_) {
      address_of(sock_, false, local_ip_, local_port_);
      local_known_ = true;
    }
    ip = local_ip_;
    port = local_port_;
  }
  socket_t socket() const override { return sock_; }

  // Sends what is buffered; false once the connection is broken.
  bool flush() const {
    if (out_.empty()) return !broken_;
    bool ok = send_all(out_.data(), out_.size());
    out_.clear();
    return ok;
  }

  // Waits up to `timeout` for the next request's first bytes, waking every 50 ms to see whether the server
  // stopped (`listening` false); false when the time is up or the server stopped. A closed or failed socket
  // counts as readable: the read that follows tells.
  template <class Listening>
  bool wait_for_request(std::chrono::milliseconds timeout, Listening listening) const {
    if (rpos_ < rend_) return true;
    auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (!listening()) return false;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      int r = wait(POLLIN, int(std::min<int64_t>(left.count(), 50)));
      if (r != 0) return r > 0;
    }
  }

 private:
  int wait(short events, int timeout_ms) const {
    pollfd p{sock_, events, 0};
    for (;;) {
      int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      return r;
    }
  }
  ssize_t receive(char* ptr, size_t size) const {
    for (;;) {  // (blocks up to SO_RCVTIMEO, the read time-out: then -1 with EAGAIN)
      ssize_t n = ::recv(sock_, ptr, size, 0);
      if (n < 0 && errno == EINTR) continue;
      return n;
    }
  }
  bool send_all(const char* p, size_t size) const {
    while (size > 0 && !broken_) {
      ssize_t n = ::send(sock_, p, size, MSG_NOSIGNAL);  // (blocks up to SO_SNDTIMEO, the write time-out)
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        broken_ = true;
        break;
      }
      p += n;
      size -= size_t(n);
    }
    return !broken_;
  }

  socket_t sock_;
  int read_timeout_ms_;
  std::vector<char> in_;
  size_t rpos_ = 0, rend_ = 0;
  mutable std::string out_;
  mutable bool broken_ = false;
  mutable bool remote_known_ = false, local_known_ = false;
  mutable std::string remote_ip_, local_ip_;
  mutable int remote_port_ = -1, local_port_ = -1;
};

}  // namespace

bool BufferedHttpServer::process_and_close_socket(socket_t sock) {
  timeval rt{time_t(read_timeout_sec_), suseconds_t(read_timeout_usec_)};
  timeval wt{time_t(write_timeout_sec_), suseconds_t(write_timeout_usec_)};
  ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &rt, sizeof(rt));
  ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &wt, sizeof(wt));
  int64_t read_ms = std::min<int64_t>(int64_t(read_timeout_sec_) * 1000 + read_timeout_usec_ / 1000, INT32_MAX);
  ConnectionStream strm(sock, int(read_ms));
  bool ret = false;
  size_t count = keep_alive_max_count_;
  auto listening = [this] { return svr_sock_ != INVALID_SOCKET; };
  while (count > 0 && strm.wait_for_request(std::chrono::seconds(keep_alive_timeout_sec_), listening)) {
    bool connection_closed = false;
    ret = process_request(strm, /*close_connection=*/count == 1, connection_closed, nullptr);
    ret = strm.flush() && ret;
    if (!ret || connection_closed) break;
    --count;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace cuvil::serving
