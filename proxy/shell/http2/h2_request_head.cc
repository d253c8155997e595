// Head translations of the HTTP/2 downstream (h2_request_head.h).
#include "shell/http2/h2_request_head.h"

#include <charconv>
#include <cstdint>
#include <optional>

#include "core/request/request_validation.h"

namespace onelayer {

namespace {

// 2^53-1 (16 digits) is the most either side accepts (kMaxContentLength):
// a longer value is refused here as invalid.
constexpr size_t kRequestLengthDigits = 16;

}  // namespace

const char* translate_h2_request(H2Session::Head& in, bool end_stream, MessageHead& out) {
  out.clear();
  out.method = std::move(in.method);
  out.target = std::move(in.path);
  out.http_major = 2;
  out.http_minor = 0;
  out.keep_alive = true;
  out.checked_by_codec = true;
  if (out.method.empty()) return "HTTP/2 request without :method";
  // The fields are kept in place, in the stream's own list (no second list
  // per request): `kept` of them so far, compacted to the front; the Host
  // field goes first at the end. A malformed head still hands over what was
  // kept before the fault (the refusal reads it: a gRPC caller gets gRPC).
  Headers& fields = in.fields;
  const bool authority_given = !in.authority.empty();
  const size_t first = in.front_field ? 1 : 0;  // the first received field
  size_t kept = first;
  auto hand_over = [&] {
    fields.resize(kept);
    if (in.front_field) {
      // Host in the room left for it, or the room given up.
      if (!authority_given) {
        fields.erase(fields.begin());
      } else {
        if (fields.front().name != "Host") fields.front().name = "Host";
        fields.front().value = std::move(in.authority);
      }
    } else if (authority_given) {
      fields.insert(fields.begin(), Header{"Host", std::move(in.authority)});
    }
    out.headers = std::move(fields);
    fields.clear();
  };
  size_t cookie_at = SIZE_MAX;  // where the joined cookie field sits among the kept
  bool length_seen = false;
  for (size_t i = first; i < fields.size(); ++i) {
    Header& f = fields[i];
    if (iequals(f.name, "host") && authority_given) continue;
    if (iequals(f.name, "cookie")) {
      if (cookie_at != SIZE_MAX) {
        std::string& joined = fields[cookie_at].value;
        joined += "; ";
        joined += f.value;
        continue;
      }
      cookie_at = kept;
    } else if (iequals(f.name, "content-length")) {
      std::optional<uint64_t> n = parse_content_length(f.value, kRequestLengthDigits);
      const char* bad = nullptr;
      if (!n) bad = "invalid content-length";
      else if (length_seen && *n != out.content_length) bad = "content-length given twice with different values";
      if (bad) {
        hand_over();
        return bad;
      }
      length_seen = true;
      out.has_content_length = true;
      out.content_length = *n;
    }
    if (kept != i) fields[kept] = std::move(f);
    ++kept;
  }
  hand_over();
  // One method policy for both fronts (is_known_method): `get` or `FROB`
  // reaches no upstream through HTTP/2 that HTTP/1.1 would refuse.
  if (!is_known_method(out.method)) return "HTTP/2 :method that HTTP/1.1 does not accept";
  // :path in origin form (or `*`) whatever :scheme says: an absolute URI
  // there would route by its own authority, not by :authority.
  const bool origin_form = !out.target.empty() && (out.target[0] == '/' || out.target == "*");
  if (!origin_form && !(out.target.empty() && out.method == "CONNECT"))
    return "HTTP/2 :path not in origin form";
  if (end_stream) {
    // No DATA follows whatever content-length says (the session's message
    // rules check they agree).
    out.chunked = false;
    if (!out.has_content_length) out.content_length = 0;
  } else {
    out.chunked = !out.has_content_length;
    out.end_pending = out.has_content_length && out.content_length == 0;
  }
  return nullptr;
}

bool translate_response_for_h2(const MessageHead& in, const DownstreamStream::ResponseMeta& meta,
                               H2Response& out) {
  std::optional<std::string> codings = response_transfer_codings(in.headers);
  if (!codings || (!codings->empty() && !meta.no_body)) return false;
  out.status = in.status;
  out.fields.clear();
  // Room for every field as received plus Via (joined onto one, or a new
  // one), the length and the extras: one allocation each for the spans and
  // the bytes.
  size_t fields = in.headers.size() + 2, bytes = meta.via.size() + 64;
  for (const Header& f : in.headers) bytes += f.name.size() + f.value.size();
  if (meta.extra) {
    fields += meta.extra->size();
    for (const Header& f : *meta.extra) bytes += f.name.size() + f.value.size();
  }
  out.fields.reserve(fields, bytes);
  rewrite_response_headers(in.headers, meta.via, out.fields, in.checked_by_codec);
  // A length says how long the body is; a 204 has none, and a response
  // without a body keeps it only for HEAD and 304 (what the body would be).
  if (in.has_content_length && in.status != 204 && (!meta.no_body || meta.head_request || in.status == 304)) {
    char digits[24];
    const char* end = std::to_chars(digits, digits + sizeof digits, in.content_length).ptr;
    out.fields.put("content-length", std::string_view(digits, static_cast<size_t>(end - digits)));
  }
  if (meta.extra)
    for (const Header& f : *meta.extra) out.fields.put(f.name, f.value);
  return true;
}

}  // namespace onelayer
