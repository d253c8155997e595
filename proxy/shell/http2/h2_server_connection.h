// The HTTP/2 side of one client connection whose first bytes were the
// HTTP/2 connection preface (h2c, prior knowledge). The connection that
// accepted it (a ClientSocket: the HTTP/1 codec's Http1ServerConnection,
// which it never names) keeps the socket and hands every byte it reads to
// on_input() (ClientSocketCodec); this object owns the H2Session (server
// role) and one H2ServerStream per request stream, and writes what the
// session has to say through ConnectionHost::write on the connection. The
// worker makes it (Http1ServerHost::take_over_h2c).
//
// Writing stops while the socket's queue is above a high-water mark (the
// session then keeps unsent DATA per stream, which is what each exchange's
// backpressure reads), and goes on from on_write_done().
//
// Timers (its own entry of the worker's timer list): header_timeout until
// the client's first SETTINGS frame is in, then idle_timeout whenever no
// stream is open (GOAWAY NO_ERROR, then the connection closes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shell/io/deferred_writer.h"
#include "shell/http2/h2_session.h"
#include "shell/io/timer_list.h"
#include "shell/stream/client_socket.h"
#include "shell/stream/client_socket_codec.h"
#include "shell/stream/server_codec_host.h"
#include "shell/stream/server_listener.h"

namespace onelayer {

class H2ServerStream;
struct Listener;

class H2ServerConnection final : public ClientSocketCodec,
                                 private H2Session::Handler,
                                 private TimerList::Entry,
                                 private DeferredWriter {
 public:
  // `cfg`: the listener's config when the connection starts (null: the
  // defaults); `request_timeout_name`: the config's request-timeout header.
  // Neither is kept.
  H2ServerConnection(ClientSocket* conn, ServerCodecHost* host, ServerListener* listener, const Listener* cfg,
                     std::string_view request_timeout_name);
  ~H2ServerConnection() override;
  H2ServerConnection(const H2ServerConnection&) = delete;
  H2ServerConnection& operator=(const H2ServerConnection&) = delete;

  // Bytes read from the connection, the preface first.
  void on_input(const char* data, size_t len) override;
  // The socket took queued bytes: write more, wake exchanges that wait.
  void on_write_done() override;
  // EOF, a read or write error, or a forced close: every open stream ends
  // (its exchange is aborted with `reason`). The connection closes itself.
  void on_connection_lost(const char* reason) override;
  // Graceful drain, in two steps (H2Session::announce_drain): a GOAWAY
  // that still takes the streams the client has on their way, then, once
  // the client acknowledges the PING behind it or kDrainNoticeMs later,
  // GOAWAY NO_ERROR with the last stream taken; open streams finish, then
  // the connection closes.
  void drain() override;

  // For the streams.
  H2Session& session() { return session_; }
  ServerCodecHost* host() const { return host_; }
  ServerListener* listener() const { return listener_; }
  ClientSocket* connection() const { return conn_; }
  // Writes what the session has (now, or after the current input or once
  // the socket drains).
  void write_out();
  // Stream `id` is woken (H2ServerStream::on_drained) after the next write.
  void wake_when_drained(int32_t id) { drain_waiters_.push_back(id); }

 private:
  void write_deferred() override;
  // H2Session::Handler.
  void on_head(int32_t stream, H2Session::Head& head, bool end_stream) override;
  void on_data(int32_t stream, const uint8_t* data, size_t len) override;
  void on_trailers(int32_t stream, Headers& trailers) override;
  void on_end(int32_t stream) override;
  void on_reset(int32_t stream, uint32_t error_code) override;
  void on_closed(int32_t stream) override;
  void on_goaway(int32_t last_stream_id, uint32_t error_code) override;
  void on_head_refused(int32_t stream, const H2Session::Head& partial) override;

  H2ServerStream* find(int32_t id);
  // A stream the session closed: freed on the next loop turn (an exchange
  // or this object may be inside one of its calls).
  void bury(int32_t id);
  static void on_reap(TimerList::Entry* e);
  static void on_timer(TimerList::Entry* e);
  void arm_idle_timer();
  void note_settings(const char* data, size_t len);
  void close_if_done();
  void log_error_end();  // the line for a connection ended by an error GOAWAY, once
  void wake_waiting_streams();
  // The body bytes the last flushes framed, told to their streams.
  void report_body_sent();

  // Frees buried streams (an entry of its own, apart from the idle timer).
  struct Reaper : TimerList::Entry {
    H2ServerConnection* owner = nullptr;
  };
  // The bound on the wait between a drain's two GOAWAYs (an entry of its
  // own: the idle timer may run meanwhile).
  struct DrainNotice : TimerList::Entry {
    H2ServerConnection* owner = nullptr;
  };
  static void on_drain_notice_timer(TimerList::Entry* e);

  ClientSocket* conn_;
  ServerCodecHost* host_;
  ServerListener* listener_;
  H2Session session_;
  // The open streams, owned through a list threaded through them; each is
  // its stream's owner pointer in the session, which finds it as cheaply as
  // the session finds the stream (no map of our own to keep up to date).
  H2ServerStream* first_stream_ = nullptr;
  size_t stream_count_ = 0;
  std::vector<std::unique_ptr<H2ServerStream>> buried_;
  std::vector<std::unique_ptr<H2ServerStream>> reaping_;  // buried_ being freed (on_reap)
  std::vector<int32_t> drain_waiters_;  // streams to wake after a write
  Reaper reaper_;
  DrainNotice drain_notice_;
  std::string out_;      // flush() output, reused
  uint64_t header_timeout_ms_ = 0, idle_timeout_ms_ = 0;
  uint64_t bytes_seen_ = 0;          // input so far, until the first SETTINGS is complete
  uint32_t first_frame_length_ = 0;  // that SETTINGS frame's payload length, once known
  bool settings_seen_ = false;
  bool in_recv_ = false;     // inside session_.recv(): writes wait until it returns
  bool writing_ = false;     // inside write_out(): a nested call only asks for another round
  bool write_wanted_ = false;
  bool lost_ = false;        // the connection is gone or closing: nothing more is written
  const char* lost_reason_ = "client_closed";  // what the exchanges of streams it cut are told
};

}  // namespace onelayer
