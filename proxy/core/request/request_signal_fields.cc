#include "core/request/request_signal_fields.h"

#include "core/grpc/grpc_protocol.h"

namespace onelayer {

namespace {

// `slot` takes `f` when it is the first field named `name`.
inline void note_first(const Header*& slot, const Header& f, std::string_view name) {
  if (slot == nullptr && iequals(f.name, name)) slot = &f;
}

}  // namespace

RequestSignalFields RequestSignalFields::find(const Headers& h, const HeaderNames& names,
                                              std::string_view idempotency_key) {
  RequestSignalFields found;
  for (const Header& f : h) {
    note_first(found.retry_owner, f, names.retry_owner);
    note_first(found.baggage, f, "baggage");
    note_first(found.request_timeout, f, names.request_timeout_ms);
    note_first(found.grpc_timeout, f, kGrpcTimeoutField);
    note_first(found.content_type, f, "content-type");
    if (!idempotency_key.empty()) note_first(found.idempotency_key, f, idempotency_key);
  }
  return found;
}

}  // namespace onelayer
