// cpp-httplib's server with its own connection loop: one buffered stream per keep-alive connection instead of
// cpp-httplib's SocketStream per request. cpp-httplib parses, routes and answers as before; only how bytes move
// between the socket and it changes.
//
// Why: cpp-httplib 0.11's SocketStream polls before every recv, polls twice and peeks (is_socket_alive) before
// every send, sends a response's head and body separately, allocates a 4 KB read buffer and asks the kernel for
// both addresses on every request: ~8 system calls and two TCP segments per response beyond the one recv and one
// send a small request needs (perf on the MLP served under wrk: send/poll/recv were ~35 % of the server's CPU).
// Here reads go straight to recv (the socket's SO_RCVTIMEO is the read time-out), writes collect in a buffer that
// is sent in one call before the next read or once the response is done, and the addresses are asked once.
#pragma once

#include <httplib.h>

namespace cuvil::serving {

class BufferedHttpServer : public httplib::Server {
 private:
  bool process_and_close_socket(socket_t sock) override;
};

}  // namespace cuvil::serving
