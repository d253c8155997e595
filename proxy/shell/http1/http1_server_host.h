// What the HTTP/1 server connection (Http1ServerConnection) needs of its
// loop thread besides I/O and what every server codec needs
// (ServerCodecHost): the parsers it borrows while a message is in progress,
// the set its idle connections are parked in, the listener's config in the
// generation in force, the descriptor budget, the HTTP/2 codec a preface
// hands the connection to, and the worker's list of its connections. The
// Worker (shell/server) implements it; a connection is made with its host
// and reaches it as its ConnectionHost (no pointer more in a connection
// every idle client holds). Each call is one virtual call: a few per
// request, none per read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "shell/http1/http_parser_pool.h"
#include "shell/stream/client_socket.h"
#include "shell/stream/client_socket_codec.h"
#include "shell/stream/server_codec_host.h"
#include "shell/stream/server_listener.h"
#include "shell/tls/tls_channel.h"

namespace onelayer {

class Http1ServerConnection;
struct Listener;

class Http1ServerHost : public ServerCodecHost {
 public:
  // Idle this long, a keep-alive connection is parked: its socket alone
  // waits for the rest of its idle time (shell/server/parked_connections.h).
  static constexpr uint64_t kParkAfterMs = 250;

  // Parsers lent to connections while a message is in progress.
  virtual HttpParserPool& parsers() = 0;
  // Parks socket `fd` (the connection's own duplicate) of a connection of
  // `l` idle for `idle_left_ms` more; false when the set cannot take it.
  virtual bool park(int fd, ServerListener* l, uint64_t idle_left_ms) = 0;
  // Listener `name`'s config in the generation in force (null: no longer
  // configured; the defaults apply). Valid within the caller's call.
  virtual const Listener* listener_config(const std::string& name) = 0;
  // A new connection's TLS channel on a TLS listener, else null.
  virtual std::unique_ptr<TlsChannel> open_tls(const std::string& listener) = 0;
  // Over this many client and upstream connections open, new clients are
  // refused.
  virtual size_t max_open_connections() = 0;
  // The connection's first bytes were the HTTP/2 preface: the codec that
  // takes its reads from now on (an H2ServerConnection).
  virtual std::unique_ptr<ClientSocketCodec> take_over_h2c(ClientSocket* c, ServerListener* l) = 0;
  // The connection's handle has closed (it leaves the worker's list).
  virtual void down_closed(Http1ServerConnection* d) = 0;
  // A transparent connection ends: its state goes (shell/transparent).
  virtual void forget_transparent(const Http1ServerConnection* d) = 0;

 protected:
  explicit Http1ServerHost(Metrics& metrics) : ServerCodecHost(metrics) {}
  ~Http1ServerHost() = default;
};

}  // namespace onelayer
