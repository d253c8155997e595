#include "core/retry/retry_reasons.h"

#include <charconv>

namespace onelayer {

void append_trigger_name(std::string& out, RetryTrigger t) {
  switch (t.outcome) {
    case AttemptOutcome::connect_failure: out += "connect-failure"; return;
    case AttemptOutcome::reset: out += "reset"; return;
    case AttemptOutcome::timeout: out += "timeout"; return;
    case AttemptOutcome::refused: out += "refused-stream"; return;
    case AttemptOutcome::response: {
      if (t.grpc) {
        out += grpc_status_name(*t.grpc);
        return;
      }
      char buf[16];
      out.append(buf, std::to_chars(buf, buf + sizeof buf, t.status).ptr);
      return;
    }
  }
}

std::string trigger_name(RetryTrigger t) {
  std::string out;
  append_trigger_name(out, t);
  return out;
}

const char* decline_name(Decline d) {
  switch (d) {
    case Decline::not_idempotent: return "not_idempotent";
    case Decline::body_too_large: return "body_too_large";
    case Decline::attempts_exhausted: return "attempts_exhausted";
    case Decline::budget_exhausted: return "budget_exhausted";
    case Decline::deadline: return "deadline";
    case Decline::retry_after_beyond_deadline: return "retry_after_beyond_deadline";
    case Decline::outer_owner: return "outer_owner";
    case Decline::inner_exhausted: return "inner_exhausted";
    case Decline::circuit_open: return "circuit_open";
    case Decline::server_pushback: return "server_pushback";
    case Decline::deadline_too_short: return "deadline_too_short";
    case Decline::none: return "none";
    case Decline::not_retryable: return "not_retryable";
  }
  return "unknown";
}

}  // namespace onelayer
