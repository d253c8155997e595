// The HTTP/2 downstream's two head translations, between an HTTP/2 stream's
// head (H2Session::Head) and the protocol-neutral MessageHead the exchange
// and request admission work on. Pure (no session, no I/O), so the fuzz
// target and unit tests drive them directly.
#pragma once

#include "shell/stream/downstream_stream.h"
#include "shell/http2/h2_field_block.h"
#include "shell/http2/h2_session.h"
#include "core/http/message_head.h"

namespace onelayer {

// A request head as received on a stream: `:method` and `:path` become
// method and target, `:authority` the Host field (first in the list; a
// `host` field the client also sent is dropped, RFC 9113 8.3.1), several
// `cookie` fields one, joined with "; " (RFC 9113 8.2.3), the version 2.0.
// The body: none when the HEADERS ended the stream, else `content-length`
// when given, else chunked (a body of unknown length follows). Fields are
// moved out of `in`. Returns nullptr, or why the head is malformed (the
// stream is answered 400 bad_request).
const char* translate_h2_request(H2Session::Head& in, bool end_stream, MessageHead& out);

// A response head for an HTTP/2 client, as H2Session::submit_response
// takes it: the :status and the regular fields.
struct H2Response {
  int status = 0;
  H2FieldBlock fields;
};

// A response head for an HTTP/2 client: the status, the upstream's fields
// without hop-by-hop and framing ones (rewrite_response_headers, which
// appends `meta.via`), `content-length` when the upstream gave one and the
// response may carry it, then `meta.extra`, each put straight into the
// block (names lower-cased there). False when HTTP/2 cannot carry this
// response (a transfer coding other than chunked, which HTTP/2 has no
// field for); `out` is then left as it was.
bool translate_response_for_h2(const MessageHead& in, const DownstreamStream::ResponseMeta& meta,
                               H2Response& out);

}  // namespace onelayer
