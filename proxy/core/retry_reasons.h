// The vocabulary of retry decisions, shared by the decision (retry.h), the
// counters (metrics.h) and the access log: what ended an attempt, and why a
// retryable failure was not retried. One list each; the metric labels and
// log words are derived from these enums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace onelayer {

enum class AttemptOutcome : uint8_t { connect_failure, reset, timeout, response };

// What made (or would have made) a retry: the outcome, and for a response
// its status. The onelayer_retries_total `reason` label.
struct RetryTrigger {
  AttemptOutcome outcome = AttemptOutcome::response;
  int status = 0;  // for response
};

// "connect-failure" | "reset" | "timeout" | the status code as text ("503").
std::string trigger_name(RetryTrigger);
// The same, appended to `out` (the access log's retry_reasons; no allocation
// beyond the string's own growth).
void append_trigger_name(std::string& out, RetryTrigger);

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
