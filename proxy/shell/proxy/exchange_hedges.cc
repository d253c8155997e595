// The exchange's hedged attempts (docs/retries.md, "Hedged requests"): the
// hedge timer, starting a leg, judging a leg's answer, adopting the leg that
// wins or outlives the current attempt, cancelling the losers. Every "hedge
// now?" and "which answer wins?" is the core's HedgePlan.
#include <spdlog/spdlog.h>

#include <bit>

#include "core/retry/grpc_attempt.h"
#include "shell/proxy/endpoint_state.h"
#include "shell/proxy/exchange.h"
#include "shell/proxy/hedge_leg.h"
#include "shell/proxy/upstream_codecs.h"
#include "shell/proxy/upstream_stream_factory.h"
#include "shell/io/connection_host.h"

namespace onelayer {

namespace {
uint64_t whole_ms_until(TimePoint deadline, TimePoint now) {
  if (deadline <= now) return 0;
  return static_cast<uint64_t>(std::chrono::ceil<Millis>(deadline - now).count());
}
}  // namespace

void HedgeLeg::on_timeout(TimerList::Entry* e) {
  HedgeLeg* leg = static_cast<HedgeLeg*>(e);
  if (leg->done || leg->adopted) return;
  AttemptResult r;
  r.outcome = leg->attempt.stream && !leg->attempt.stream->ready() ? AttemptOutcome::connect_failure
                                                                   : AttemptOutcome::timeout;
  r.request_may_have_reached = r.outcome != AttemptOutcome::connect_failure;
  leg->ex_->on_leg_failed(leg, r);
}

void Exchange::arm_hedge(TimePoint last_start, TimePoint now) {
  std::optional<Millis> wait = hedge_->next_delay(ups_->latency, last_start, now);
  if (!wait) return;
  timers().arm(hedge_timer_, static_cast<uint64_t>(wait->count()), on_hedge_timer);
}

void Exchange::on_hedge_timer(TimerList::Entry* e) {
  Exchange* ex = static_cast<HedgeTimer*>(e)->ex;
  if (!ex->finished_) ex->send_hedge(Clock::now());
}

bool Exchange::legs_in_flight() const {
  for (const auto& leg : legs_)
    if (!leg->done) return true;
  return false;
}

void Exchange::send_hedge(TimePoint now) {
  // A hedge runs beside an attempt in flight whose whole request is kept.
  if (!hedge_ || finished_ || response_started_ || waiting_backoff_ || !attempt_.stream || !request_complete_ ||
      !body_.replayable())
    return;
  HedgePlan::Due due;
  due.head_received = grpc_head_held_;
  due.untried_endpoint = static_cast<size_t>(std::popcount(tried_)) < ucfg_->endpoints.size();
  const HedgePlan::Decision d = hedge_->on_due(*rs_, now, due, &ups_->budget, ups_->latency);
  if (!d.hedge) {
    if (is_counted_decline(d.declined)) rm_->on_hedge(RouteMetrics::HedgeResult::declined);
    return;
  }
  const RetryState::Admission a = rs_->admit_attempt(now, &ups_->breaker);
  if (!a.admitted) {
    rm_->on_hedge(RouteMetrics::HedgeResult::declined);
    return;
  }
  rm_->on_attempt();
  HedgeLeg* leg = legs_.emplace_back(std::make_unique<HedgeLeg>(this)).get();
  EndpointState* ep = pick_endpoint(now, leg->attempt);
  leg->attempt.number = rs_->attempt_number();
  leg->attempt.hedge = true;
  note_endpoint_tried(ep->label);
  leg->deadline = now + a.timeout;
  timers().arm(*leg, static_cast<uint64_t>(a.timeout.count()), HedgeLeg::on_timeout);
  spdlog::debug("route {}: hedge {} to {} after {} ms", route_->name, hedge_->sent(), ep->label,
                std::chrono::duration_cast<Millis>(now - attempt_.started).count());
  const std::shared_ptr<TlsClientContext>& tls = gen_->tls.upstreams[route_->upstream_index];
  const Millis connect_timeout = std::min(ucfg_->connect_timeout, a.timeout);
  UpstreamStreamFactory* f = host_->upstream_streams();
  ConnectionHost* c = &host_->connection_host();
  leg->attempt.stream =
      f ? f->open(c, ep, *ucfg_, leg->attempt.address, tls, leg, head_request_, connect_timeout)
        : UpstreamCodecs::instance().open(c, ep, *ucfg_, leg->attempt.address, tls, leg, head_request_,
                                          connect_timeout);
  arm_hedge(now, now);  // the next one, when `max` allows
  if (leg->attempt.stream->ready()) send_head_and_body(leg->attempt, now, leg);
}

void Exchange::on_leg_connected(HedgeLeg* leg) {
  if (finished_) return;
  if (grpc_call_ && leg->attempt.stream->http1_connection()) {  // an `auto` endpoint chose http/1.1
    AttemptResult r;
    r.outcome = AttemptOutcome::connect_failure;
    r.request_may_have_reached = false;
    on_leg_failed(leg, r);
    return;
  }
  send_head_and_body(leg->attempt, Clock::now(), leg);
}

void Exchange::on_leg_failed(HedgeLeg* leg, const AttemptResult& r) {
  if (leg->done) return;
  using Result = UpstreamEndpoints::Result;
  const TimePoint now = end_attempt_of(leg->attempt, r.outcome == AttemptOutcome::refused ? Result::cancelled
                                                                                           : Result::failure);
  storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, leg->attempt.number, r);
  end_leg(leg);
  if (!finished_) after_retryable_answer(r, now);
}

int Exchange::on_leg_head(HedgeLeg* leg, MessageHead& head) {
  if (finished_ || response_started_) {
    end_attempt_of(leg->attempt, UpstreamEndpoints::Result::cancelled);
    end_leg(leg);
    return -1;
  }
  const AttemptResult r = response_result(head, head.headers);
  if (HedgePlan::wins(r, route_->retry.retry_on)) {
    // The first final answer: the hedge becomes the request's attempt and
    // its head goes the way every head goes.
    adopt_leg(leg, Clock::now(), true);
    return on_up_head(head);
  }
  // A retryable answer on the hedge: it ends, the others run on.
  const TimePoint now = end_attempt_of(leg->attempt, response_verdict(r));
  storm_on_attempt_result(*ups_, *ucfg_, *rm_, *route_, leg->attempt.number, r);
  end_leg(leg);
  after_retryable_answer(r, now);
  return -1;
}

void Exchange::adopt_leg(HedgeLeg* leg, TimePoint now, bool answered) {
  if (leg == nullptr) {
    for (const auto& l : legs_) {
      if (!l->done) {
        leg = l.get();
        break;
      }
    }
    if (leg == nullptr) return;
  }
  if (attempt_.stream) {
    // The current attempt lost. It does not count in the first-attempt
    // latency (see UpstreamLatency).
    end_attempt(UpstreamEndpoints::Result::cancelled);
    drop_upstream();  // HTTP/1: connection closed; HTTP/2: RST_STREAM CANCEL
  }
  timers().disarm(*leg);
  attempt_ = leg->attempt;
  leg->attempt = Attempt{};
  leg->adopted = true;
  leg->done = true;
  arm_timer(Millis(whole_ms_until(leg->deadline, now)), on_attempt_timeout);
  if (answered) cancel_legs();
}

void Exchange::end_leg(HedgeLeg* leg) {
  leg->done = true;
  timers().disarm(*leg);
  if (UpstreamStream* s = leg->attempt.stream) {
    leg->attempt.stream = nullptr;
    s->cancel();  // HTTP/1: connection closed; HTTP/2: RST_STREAM CANCEL
  }
}

void Exchange::cancel_legs() {
  timers().disarm(hedge_timer_);
  for (const auto& leg : legs_) {
    if (leg->done) continue;
    end_attempt_of(leg->attempt, UpstreamEndpoints::Result::cancelled);
    end_leg(leg.get());
  }
}

void Exchange::after_retryable_answer(const AttemptResult& r, TimePoint now) {
  if (!hedge_ || !r.is_grpc() || finished_) return;
  if (r.pushback) hedge_->on_pushback(*r.pushback, now);
  // The next hedge at once, or when the pushback allows.
  std::optional<Millis> wait = hedge_->next_delay_at_once(now);
  if (!wait) return;
  timers().arm(hedge_timer_, static_cast<uint64_t>(wait->count()), on_hedge_timer);
}

}  // namespace onelayer
