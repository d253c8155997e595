// The rules a received HTTP/2 message keeps to be well-formed (RFC 9113
// 8.1-8.3), checked field by field as the codec decodes a stream's header
// blocks and counts its DATA:
//
// - names: lower-case tokens (RFC 9110 5.1, RFC 9113 8.2.1); values: no
//   control bytes but HTAB, no DEL, no leading or trailing SP/HTAB
//   (obs-text is allowed);
// - pseudo-header fields: only the ones of the message's kind, each at most
//   once, non-empty, before every regular field, never in trailers;
//   requests carry :method, :scheme and :path (CONNECT: :authority and
//   neither of the other two) and :authority or host; an http(s) :path
//   starts with "/" (or is "*" for OPTIONS); :method is a token, :scheme
//   ALPHA *(ALPHA / DIGIT / "+" / "-" / "."), :authority and host the
//   characters of RFC 3986's authority; :status three digits, not 101;
//   :protocol (extended CONNECT, RFC 8441) is not offered, so not taken;
// - connection-specific fields (connection, keep-alive, proxy-connection,
//   transfer-encoding, upgrade; te other than "trailers") are malformed;
// - content-length: digits, at most once, and the DATA received adds up to
//   it; a response to HEAD, a 204 and a 304 carry no DATA; a 204's
//   "content-length: 0" is tolerated and dropped (servers send it), any
//   other is malformed; a 2xx to CONNECT drops it; in trailers it is
//   dropped (it frames nothing there);
// - a 1xx head is interim: the final head follows, and no DATA before it;
// - trailers end the stream.
//
// A malformed message is reset with PROTOCOL_ERROR (RFC 9113 8.1.1) by
// the caller; nothing of it goes further. These are the rules nghttp2
// enforces when its HTTP messaging is on; onelayer turns that off and
// keeps them here, where the field's kind comes out of the same pass that
// checks it (the session stores the field by that kind) and the checks
// are table lookups over the bytes.
//
// One per stream. Pure: no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace onelayer {

class H2MessageRules {
 public:
  // What a field is, or that the message is malformed. `drop`: a field the
  // message may carry but that goes no further (a 204's content-length: 0).
  enum class Field : uint8_t { malformed, drop, regular, method, scheme, authority, path, status };

  // What the stream receives: a request (a server's stream) or a response
  // (a client's).
  enum class Side : uint8_t { request, response };

  explicit H2MessageRules(Side side = Side::request) : side_(side) {}

  // Responses: the method of the request sent on the stream (HEAD answers
  // carry no DATA; a 2xx to CONNECT drops content-length).
  void expect_response_to(std::string_view method);

  // A header block begins: the head (or, after a 1xx, the next head) until
  // the final head ended, trailers after it.
  void begin_block();
  // One field of the block being decoded, in order.
  Field field(std::string_view name, std::string_view value);
  // The block ended (`ends_stream`: it carried END_STREAM). False: the
  // message is malformed.
  bool end_block(bool ends_stream);
  // `n` bytes of DATA arrived. False: the message is malformed.
  bool data(size_t n);
  // END_STREAM arrived on a DATA frame. False: the message is malformed.
  bool end_stream() const;

  // The block being decoded (or the last one) is trailers.
  bool in_trailers() const { return phase_ == Phase::trailers; }
  // The last head that ended was interim (1xx): the final head follows.
  bool interim() const { return phase_ == Phase::head && status_ != 0; }
  // The head's :status (0 before one).
  int status() const { return status_; }
  // content-length of the head (-1: none, or not binding).
  int64_t content_length() const { return content_length_; }

 private:
  enum class Phase : uint8_t { head, body, trailers };
  // What the head carried so far.
  enum Seen : uint16_t {
    kMethod = 1 << 0,
    kScheme = 1 << 1,
    kPath = 1 << 2,
    kAuthority = 1 << 3,
    kHost = 1 << 4,
    kStatus = 1 << 5,
    kRegular = 1 << 6,       // a regular field: no pseudo-header after it
    kMethodHead = 1 << 7,    // requests: :method HEAD
    kMethodConnect = 1 << 8,
    kMethodOptions = 1 << 9,
    kPathSlash = 1 << 10,    // :path starts with "/"
    kPathAsterisk = 1 << 11, // :path is "*"
    kSchemeHttp = 1 << 12,   // :scheme http or https
  };

  Field pseudo(std::string_view name, std::string_view value);
  Field request_pseudo(std::string_view name, std::string_view value);
  Field response_pseudo(std::string_view name, std::string_view value);
  Field content_length_field(std::string_view value);
  bool once(uint16_t flag, std::string_view value);
  bool end_request_head();
  bool end_response_head();

  Side side_;
  Phase phase_ = Phase::head;
  uint16_t seen_ = 0;
  bool sent_head_ = false;     // responses: the request was HEAD
  bool sent_connect_ = false;  // responses: the request was CONNECT
  int status_ = 0;
  int64_t content_length_ = -1;
  int64_t received_ = 0;
};

}  // namespace onelayer
