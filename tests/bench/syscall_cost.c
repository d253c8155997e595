/* CPU cost of the socket calls a proxy makes per request, over loopback TCP.
 *
 * One connected pair on 127.0.0.1 (TCP_NODELAY); each round trip writes 100
 * bytes one way and reads them, then back. The same exchange is made with
 * write(2)/writev(2)/read(2) (the file layer, what libuv uses) and with
 * send(2)/sendmsg(2)/recv(2) (the socket calls), and the process's CPU time
 * (user + system, getrusage) per write+read pair is printed for each.
 * Bounded: ROUNDS round trips per variant, a few seconds in all.
 *
 *   cc -O2 -o /tmp/syscall_cost tests/bench/syscall_cost.c && /tmp/syscall_cost
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

enum { ROUNDS = 300000 };

static double cpu_seconds(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static char payload[100];
static char sink[65536];
static struct iovec two_parts[2] = {{payload, 40}, {payload + 40, 60}};

static void w_writev(int fd) { (void)!writev(fd, two_parts, 2); }
static void w_write(int fd) { (void)!write(fd, payload, sizeof payload); }
static void w_sendmsg(int fd) {
  struct msghdr m;
  memset(&m, 0, sizeof m);
  m.msg_iov = two_parts;
  m.msg_iovlen = 2;
  (void)!sendmsg(fd, &m, MSG_NOSIGNAL);
}
static void w_send(int fd) { (void)!send(fd, payload, sizeof payload, MSG_NOSIGNAL); }
static void r_read(int fd) { (void)!read(fd, sink, sizeof sink); }
static void r_recv(int fd) { (void)!recv(fd, sink, sizeof sink, 0); }

struct variant {
  const char* name;
  void (*wr)(int);
  void (*rd)(int);
};

int main(void) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (l < 0 || bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1) || getsockname(l, (struct sockaddr*)&a, &alen)) {
    perror("listen");
    return 1;
  }
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(c, (struct sockaddr*)&a, sizeof a)) {
    perror("connect");
    return 1;
  }
  int s = accept(l, NULL, NULL);
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const struct variant vs[] = {
      {"writev(2 parts) + read", w_writev, r_read}, {"write + read", w_write, r_read},
      {"sendmsg(2 parts) + recv", w_sendmsg, r_recv}, {"send + recv", w_send, r_recv},
      {"send + read", w_send, r_read},         {"writev(2 parts) + recv", w_writev, r_recv},
  };
  printf("| calls | ns of CPU per write+read |\n|---|---:|\n");
  for (size_t i = 0; i < sizeof vs / sizeof vs[0]; ++i) {
    double t0 = cpu_seconds();
    for (int k = 0; k < ROUNDS; ++k) {
      vs[i].wr(c);
      vs[i].rd(s);
      vs[i].wr(s);
      vs[i].rd(c);
    }
    printf("| %s | %.0f |\n", vs[i].name, (cpu_seconds() - t0) / ROUNDS / 2 * 1e9);
  }
  return 0;
}
