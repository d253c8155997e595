#include "shell/proxy/hedge_leg.h"

#include "shell/proxy/exchange.h"

namespace onelayer {

std::string_view HedgeLeg::request_timeout_header() const { return ex_->request_timeout_header(); }

namespace {
AttemptResult failure(AttemptOutcome o, bool reached) {
  AttemptResult r;
  r.outcome = o;
  r.request_may_have_reached = reached;
  return r;
}
}  // namespace

void HedgeLeg::on_connected() {
  if (adopted) return ex_->on_connected();
  if (!done) ex_->on_leg_connected(this);
}

void HedgeLeg::on_stream_moved(UpstreamStream* s) {
  if (adopted) return ex_->on_stream_moved(s);
  attempt.stream = s;
}

bool HedgeLeg::reopens_response_window() const { return ex_->reopens_response_window(); }

void HedgeLeg::on_connect_failed(int err, bool dns) {
  if (adopted) return ex_->on_connect_failed(err, dns);
  if (!done) ex_->on_leg_failed(this, failure(AttemptOutcome::connect_failure, false));
}

void HedgeLeg::on_tls_failed(const std::string& why, bool verify) {
  if (adopted) return ex_->on_tls_failed(why, verify);
  if (!done) ex_->on_leg_failed(this, failure(AttemptOutcome::connect_failure, false));
}

int HedgeLeg::on_up_head(MessageHead& head) {
  if (adopted) return ex_->on_up_head(head);
  if (done) return -1;
  return ex_->on_leg_head(this, head);
}

// A leg's stream carries a body, trailers or an end only once its head made
// it the exchange's attempt.
int HedgeLeg::on_up_body(const char* data, size_t len) { return adopted ? ex_->on_up_body(data, len) : -1; }

void HedgeLeg::on_up_trailers(Headers& trailers) {
  if (adopted) ex_->on_up_trailers(trailers);
}

void HedgeLeg::on_up_end(bool reusable) {
  if (adopted) ex_->on_up_end(reusable);
}

void HedgeLeg::on_up_error(int err) {
  if (adopted) return ex_->on_up_error(err);
  if (!done) ex_->on_leg_failed(this, failure(AttemptOutcome::reset, true));
}

void HedgeLeg::on_up_refused() {
  if (adopted) return ex_->on_up_refused();
  if (!done) ex_->on_leg_failed(this, failure(AttemptOutcome::refused, false));
}

void HedgeLeg::on_up_tls_error(const std::string& why) {
  if (adopted) return ex_->on_up_tls_error(why);
  if (!done) ex_->on_leg_failed(this, failure(AttemptOutcome::reset, true));
}

void HedgeLeg::on_up_bad_response() {
  if (adopted) return ex_->on_up_bad_response();
  if (!done) ex_->on_leg_failed(this, failure(AttemptOutcome::reset, true));
}

void HedgeLeg::on_up_drained() {
  if (adopted) ex_->on_up_drained();
}

void HedgeLeg::on_up_read_done() {
  if (adopted) ex_->on_up_read_done();
}

}  // namespace onelayer
