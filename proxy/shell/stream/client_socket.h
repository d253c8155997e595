// A client's connection as the codec that runs on it sees it, whichever
// codec owns the socket. Http1ServerConnection (shell/http1) accepts every
// client connection and reads its first bytes; when they are the HTTP/2
// preface it hands every later read to a ClientSocketCodec (the HTTP/2
// codec, shell/http2), which writes, asks who the client is and closes
// through this. Neither codec knows the other.
//
// A Conn with more virtual functions, not an interface of its own: they
// share Conn's vtable pointer, so the connection every idle client holds
// grows by nothing.
#pragma once

#include <cstdint>
#include <string>

#include "shell/io/conn.h"

namespace onelayer {

struct Destination;

class ClientSocket : public Conn {
 public:
  using Conn::Conn;

  virtual const std::string& peer_ip() const = 0;
  virtual bool over_tls() const = 0;
  // The client's verified identity (docs/tls.md "Callers"); "" none.
  virtual const std::string& caller() const = 0;
  // Which client connection this is, unique on this thread.
  virtual uint64_t client_connection() const = 0;
  // The name of the listener it came in on.
  virtual const std::string& listener_name() const = 0;
  // Transparent listeners: the connection's original destination (null elsewhere).
  virtual const Destination* original_destination() const = 0;
  // Closes now (what runs on it is aborted with `reason`).
  virtual void abort_connection(const char* reason = "client_closed") = 0;
  // Closes once what is written has gone.
  virtual void close_when_flushed() = 0;
};

}  // namespace onelayer
