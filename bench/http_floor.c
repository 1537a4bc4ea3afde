/* The least an HTTP/1.1 server can do per request: one thread, epoll, keep-alive, each request's head read up
 * to its blank line and its body skipped by Content-Length, a fixed response of a given size written back.
 * No parsing beyond that, no model, no threads handing work over. bench/serve_floor.py measures its CPU time
 * per request under wrk: the floor under any server's cost per request on this machine and kernel.
 *
 *   cc -O2 -o http_floor bench/http_floor.c && ./http_floor PORT RESPONSE_BODY_BYTES
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { kMaxConn = 1024, kBuf = 1 << 20, kOut = 4 << 20 };

typedef struct {
  char* buf;      /* bytes read and not yet consumed */
  size_t len;
  size_t skip;    /* body bytes of the current request still to discard */
} Conn;

static Conn conns[kMaxConn];
static char* response;
static size_t response_len;

/* Consumes every complete request in c->buf, appending one response per request to `out`; returns how many. */
static size_t serve(Conn* c, char* out, size_t* out_len) {
  size_t n = 0, pos = 0;
  while (*out_len + response_len <= kOut) { /* (a full `out` is written, then the rest served) */
    if (c->skip) {
      size_t take = c->len - pos < c->skip ? c->len - pos : c->skip;
      pos += take;
      c->skip -= take;
      if (c->skip) break;
      memcpy(out + *out_len, response, response_len); /* the request is complete */
      *out_len += response_len;
      ++n;
      continue;
    }
    char* end = memmem(c->buf + pos, c->len - pos, "\r\n\r\n", 4);
    if (!end) break;
    size_t body = 0;
    for (char* line = c->buf + pos; line < end; line = strstr(line, "\r\n") + 2)
      if (strncasecmp(line, "content-length:", 15) == 0) body = strtoul(line + 15, NULL, 10);
    pos = (size_t)(end - c->buf) + 4;
    c->skip = body;
    if (!body) {
      memcpy(out + *out_len, response, response_len);
      *out_len += response_len;
      ++n;
    }
  }
  memmove(c->buf, c->buf + pos, c->len - pos);
  c->len -= pos;
  return n;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s PORT RESPONSE_BODY_BYTES\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]);
  size_t body = strtoul(argv[2], NULL, 10);
  char head[256];
  int head_len = snprintf(head, sizeof head,
                          "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %zu\r\n\r\n",
                          body);
  response_len = (size_t)head_len + body;
  if (response_len > kOut) {
    fprintf(stderr, "response over %d bytes\n", kOut);
    return 2;
  }
  response = calloc(1, response_len);
  memcpy(response, head, (size_t)head_len);

  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(ls, (struct sockaddr*)&addr, sizeof addr) || listen(ls, 512)) {
    perror("bind/listen");
    return 1;
  }
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  printf("listening %d\n", port);
  fflush(stdout);
  char* out = malloc(kOut);
  struct epoll_event events[256];
  for (;;) {
    int k = epoll_wait(ep, events, 256, -1);
    for (int i = 0; i < k; ++i) {
      int fd = events[i].data.fd;
      if (fd == ls) {
        int cfd;
        while ((cfd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          if (cfd >= kMaxConn) {
            close(cfd);
            continue;
          }
          setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conns[cfd].buf = malloc(kBuf);
          conns[cfd].len = conns[cfd].skip = 0;
          struct epoll_event cev = {.events = EPOLLIN, .data.fd = cfd};
          epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev);
        }
        continue;
      }
      Conn* c = &conns[fd];
      ssize_t r = read(fd, c->buf + c->len, kBuf - c->len);
      if (r <= 0) {
        if (r < 0 && errno == EAGAIN) continue;
        free(c->buf);
        c->buf = NULL;
        close(fd);
        continue;
      }
      c->len += (size_t)r;
      size_t out_len;
      do {
        out_len = 0;
        serve(c, out, &out_len);
        size_t done = 0;
        while (done < out_len) { /* (blocking-style retry: responses are small and clients read them) */
          ssize_t w = write(fd, out + done, out_len - done);
          if (w < 0 && errno != EAGAIN) break;
          if (w > 0) done += (size_t)w;
        }
      } while (out_len + response_len > kOut);
    }
  }
}
