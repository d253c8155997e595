// One hedged attempt of an exchange (docs/retries.md, "Hedged requests"):
// the receiver of a stream that runs beside the exchange's current attempt.
// Until the exchange adopts it, its events go to the exchange's hedge
// handlers (Exchange::on_leg_*), which decide whether its answer wins (the
// core's HedgePlan::wins). Once adopted, it is the exchange's current
// attempt and passes every event of its stream on unchanged, as if the
// exchange had opened it. A leg outlives its stream: the exchange keeps it
// until it is destroyed itself, so no leg dies inside its own callback.
#pragma once

#include "core/base/clock.h"
#include "shell/proxy/attempt.h"
#include "shell/io/timer_list.h"
#include "shell/stream/upstream_stream.h"

namespace onelayer {

class Exchange;

class HedgeLeg final : public UpstreamStream::Receiver, public TimerList::Entry {
 public:
  explicit HedgeLeg(Exchange* ex) : ex_(ex) {}

  Attempt attempt;           // its stream, endpoint and member (moved out on adoption)
  TimePoint deadline{};      // when its attempt times out
  bool adopted = false;      // the exchange's current attempt now: events pass through
  bool done = false;         // ended (lost, failed, or adopted)

  void on_connected() override;
  void on_stream_moved(UpstreamStream* s) override;
  bool needs_http1() const override { return false; }
  std::string_view request_timeout_header() const override;
  bool reopens_response_window() const override;
  void on_connect_failed(int err, bool dns) override;
  void on_tls_failed(const std::string& why, bool verify) override;
  int on_up_head(MessageHead& head) override;
  int on_up_body(const char* data, size_t len) override;
  void on_up_trailers(Headers& trailers) override;
  void on_up_end(bool reusable) override;
  void on_up_error(int err) override;
  void on_up_refused() override;
  void on_up_tls_error(const std::string& why) override;
  void on_up_bad_response() override;
  void on_up_drained() override;
  void on_up_read_done() override;
  // Its attempt timer (the Entry it is) fired.
  static void on_timeout(TimerList::Entry* e);

 private:
  Exchange* ex_;
};

}  // namespace onelayer
