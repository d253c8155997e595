// The vocabulary of retry decisions, shared by the decision (retry.h), the
// counters (metrics.h) and the access log: what ended an attempt, and why a
// retryable failure was not retried. One list each; the metric labels and
// log words are derived from these enums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/grpc_status.h"

namespace onelayer {

// refused: an HTTP/2 upstream refused the stream (REFUSED_STREAM, or the
// stream was above a GOAWAY's last-stream-id): it never reached the
// application.
enum class AttemptOutcome : uint8_t { connect_failure, reset, timeout, response, refused };

// What made (or would have made) a retry: the outcome, and for a response
// its status, and for a gRPC response its grpc-status. The
// onelayer_retries_total `reason` label.
struct RetryTrigger {
  AttemptOutcome outcome = AttemptOutcome::response;
  int status = 0;  // for response
  // For a response of a gRPC call: the grpc-status the shell read (from a
  // Trailers-Only head or trailers after a head with no message between).
  // When set, it is the trigger: the HTTP status of a gRPC answer is 200.
  std::optional<GrpcStatus> grpc;
  bool is_grpc() const { return outcome == AttemptOutcome::response && grpc.has_value(); }
};

// "connect-failure" | "reset" | "timeout" | "refused-stream" | the status
// code as text ("503") | for a gRPC trigger the status name ("unavailable").
std::string trigger_name(RetryTrigger);
// The same, appended to `out` (the access log's retry_reasons; no allocation
// beyond the string's own growth).
void append_trigger_name(std::string& out, RetryTrigger);

// The access log's retry_reasons word for a re-send (RetryState::Decision's
// resend): a refused stream sent again at once, not a retry, so not a
// trigger name.
inline constexpr std::string_view kResendReason = "resend";

// Why a retryable failure was not retried. The first kDeclineReasonCount
// values are the `reason` label values of onelayer_retries_declined_total, in
// the order they are rendered; `none` (nothing was declined) and
// `not_retryable` (the outcome was final, or the response had started
// downstream) are not labels and are never counted.
enum class Decline : uint8_t {
  not_idempotent,
  body_too_large,
  attempts_exhausted,
  budget_exhausted,
  deadline,
  retry_after_beyond_deadline,
  outer_owner,
  inner_exhausted,
  circuit_open,
  server_pushback,  // grpc-retry-pushback-ms negative or unparseable: the server said do not retry
  deadline_too_short,  // the time left is below retry.min_time_left
  none,
  not_retryable
};
inline constexpr size_t kDeclineReasonCount = static_cast<size_t>(Decline::none);

// True for the values counted in onelayer_retries_declined_total.
constexpr bool is_counted_decline(Decline d) { return static_cast<size_t>(d) < kDeclineReasonCount; }

// "not_idempotent", "body_too_large", ... exactly the documented label
// values; "none" and "not_retryable" for the two that are not labels.
const char* decline_name(Decline);

}  // namespace onelayer
