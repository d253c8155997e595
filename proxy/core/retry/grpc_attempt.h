// What a gRPC call's response says about its attempt (docs/grpc.md): where
// the outcome is, and the AttemptResult parts read from it.
#pragma once

#include "core/http/http_headers.h"
#include "core/retry/retry.h"

namespace onelayer {

// A gRPC call's response head that does not carry the outcome: HTTP 200
// without grpc-status. The outcome follows in the trailers, unless a
// message comes first (then the call is committed). The shell holds such a
// head back until one of them arrives.
bool grpc_outcome_follows(int http_status, const Headers& head);

// Reads grpc-status and grpc-retry-pushback-ms from `fields` (a
// Trailers-Only head, or the trailers after a head with no message
// between) into `r`, for an HTTP 200 only (any other status is classified
// by itself, as gRPC clients do). An invalid grpc-status is left unread; a
// pushback is read whatever the grpc-status (the retry decision ignores it
// on an answer that is not retried).
void read_grpc_outcome(int http_status, const Headers& fields, AttemptResult& r);

}  // namespace onelayer
