// MessageHead: the head of one HTTP message as the proxy handles it, whatever
// the protocol it came in or goes out with. The HTTP/1 parser fills it from
// llhttp, the HTTP/2 streams from their fields; admission and the exchange
// read it without asking which protocol it came with.
#pragma once

#include <cstdint>
#include <string>

#include "core/http/http_headers.h"

namespace onelayer {

struct MessageHead {
  std::string method;   // requests
  std::string target;   // requests
  int status = 0;       // responses
  std::string reason;   // responses
  uint8_t http_major = 1, http_minor = 1;
  Headers headers;
  bool obs_fold = false;  // requests: a header line continued another one
  bool chunked = false;
  bool has_content_length = false;
  uint64_t content_length = 0;
  bool keep_alive = true;
  // The codec refused every name that is not a token and every value with a
  // control byte (an HTTP/2 head: the session resets such a stream before
  // onelayer sees it), so the header rewrites need not check them again.
  bool checked_by_codec = false;
  // An HTTP/2 request whose content-length says 0 on a HEADERS frame that
  // did not end the stream: complete only at END_STREAM, since DATA after
  // it would make it malformed. It is not forwarded before then.
  bool end_pending = false;

  void clear();
  // Takes a parsed request head: its strings and fields by swap (`from`
  // gets this head's storage back, for the parser's next head to reuse),
  // the rest copied, checked_by_codec too.
  void take_request(MessageHead& from);
};

}  // namespace onelayer
