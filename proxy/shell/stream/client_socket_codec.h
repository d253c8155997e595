// A codec running on a client connection another codec accepted: the
// HTTP/2 codec (H2ServerConnection) on a connection whose first bytes were
// the HTTP/2 preface. The accepting connection (ClientSocket) keeps the
// socket and hands it everything it reads and hears of the socket through
// this; the codec writes and closes through the ClientSocket. It is made by
// a factory the server layer installs, so the HTTP/1 codec that reads the
// preface never names the HTTP/2 one. One virtual call per read of an
// HTTP/2 client; an HTTP/1 client never calls it.
#pragma once

#include <cstddef>

namespace onelayer {

class ClientSocketCodec {
 public:
  virtual ~ClientSocketCodec() = default;

  // Bytes read from the connection (the first call: from its first byte).
  virtual void on_input(const char* data, size_t len) = 0;
  // The socket took queued bytes.
  virtual void on_write_done() = 0;
  // EOF, a read or write error, or a forced close: what runs on the
  // connection ends (aborted with `reason`); the socket closes itself.
  virtual void on_connection_lost(const char* reason) = 0;
  // The worker drains: finish what runs, then close.
  virtual void drain() = 0;
};

}  // namespace onelayer
