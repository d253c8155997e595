// ConnectionHost: what a connection needs of the event loop thread it runs
// on, and no more. The loop and its clock, the one timer list, the one read
// buffer, the write path (direct send, else a queued libuv write; TLS
// encrypts first), writes deferred to the end of a poll, a scratch string,
// the drain flag and the process's counters. In the proxy the Worker is the
// one host: it derives from this class (no virtual call: a connection's
// calls cost what they cost when they were the Worker's own), and a codec
// that needs no more than this includes this header instead of
// shell/server/worker.h. Tests make hosts of their own
// (tests/unit/shell/io/connection_host_test.cc); Conn::worker() is then not
// to be called.
#pragma once

#include <uv.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shell/io/deferred_writer.h"
#include "shell/io/timer_list.h"

namespace onelayer {

class Conn;
class Metrics;

class ConnectionHost {
 public:
  ConnectionHost(const ConnectionHost&) = delete;
  ConnectionHost& operator=(const ConnectionHost&) = delete;

  uv_loop_t* loop() { return &loop_; }
  // The host's timers (connections, exchanges): one libuv timer for all.
  TimerList& timers() { return *timers_; }
  // Where connections read a socket into; nothing is kept in it past a
  // read callback.
  char* read_buffer() { return read_buf_.get(); }
  static constexpr size_t kReadBufferSize = 64 * 1024;
  // A string a connection may build output in within one call.
  std::string& scratch() { return scratch_; }
  // The host is shutting down: connections finish what they carry and close.
  bool draining() const { return draining_; }
  Metrics& metrics() { return metrics_; }

  // Writes `parts` in order: tries a direct write first, queues the rest.
  // Returns 0 or a negative libuv error.
  int write(Conn* c, const uv_buf_t* parts, unsigned n);
  int write(Conn* c, std::string_view s) {
    uv_buf_t b = uv_buf_init(const_cast<char*>(s.data()), static_cast<unsigned>(s.size()));
    return write(c, &b, 1);
  }
  // Sends the ciphertext a connection's TLS channel has ready. 0 or a
  // negative libuv error.
  int flush_tls(Conn* c);

  // Read callbacks of HTTP/2 connections run between enter_read() and
  // leave_read(). Inside them defer_write() queues `w` (true) for one
  // write_deferred() after the poll, and so it does for every writer but
  // the one writing during the host's passes; elsewhere it returns false
  // and the caller writes at once. A writer going away calls forget_write().
  // What a poll queues is written after the poll that follows it, one that
  // returns at once: the bytes that reached the host meanwhile (the rest
  // of a client's burst, responses on the other upstream connections) leave
  // in the same writes instead of one write each (docs/http2.md, "Writes").
  void enter_read() { ++reading_; }
  void leave_read() { --reading_; }
  bool defer_write(DeferredWriter* w);
  void forget_write(DeferredWriter* w);

 protected:
  // Initialises the loop and the timer list; the owner closes the loop.
  explicit ConnectionHost(Metrics& metrics);
  ~ConnectionHost() = default;

  // Each writer queued now writes once; while writing_deferred_, what that
  // queues for another writer waits for the next pass.
  void write_deferred_writers();

  uv_loop_t loop_;
  std::optional<TimerList> timers_;  // made once loop_ is initialised
  std::vector<DeferredWriter*> deferred_writes_;
  bool writing_deferred_ = false;  // inside the owner's passes over deferred_writes_
  bool draining_ = false;

 private:
  int write_raw(Conn* c, const uv_buf_t* parts, unsigned n);
  int write_tls(Conn* c, const uv_buf_t* parts, unsigned n);

  Metrics& metrics_;
  std::vector<DeferredWriter*> writing_now_;  // deferred_writes_ being written (reused)
  int reading_ = 0;
  DeferredWriter* writing_turn_ = nullptr;  // the writer whose write_deferred() runs
  std::unique_ptr<char[]> read_buf_{new char[kReadBufferSize]};
  // Multi-part writes up to this size are copied together and leave as one
  // send(2); past it, the copy would cost more than sendmsg(2) saves.
  static constexpr size_t kGatherSize = 2048;
  std::unique_ptr<char[]> gather_buf_{new char[kGatherSize]};
  std::string scratch_;
};

}  // namespace onelayer
