#include "core/retry/grpc_attempt.h"

#include "core/grpc/grpc_protocol.h"

namespace onelayer {

bool grpc_outcome_follows(int http_status, const Headers& head) {
  return http_status == 200 && find_header(head, kGrpcStatusField) == nullptr;
}

void read_grpc_outcome(int http_status, const Headers& fields, AttemptResult& r) {
  if (http_status != 200) return;
  if (const Header* s = find_header(fields, kGrpcStatusField)) r.grpc = parse_grpc_status(s->value);
  if (const Header* p = find_header(fields, kGrpcPushbackField)) r.pushback = parse_grpc_pushback(p->value);
}

}  // namespace onelayer
