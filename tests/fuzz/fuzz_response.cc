// libFuzzer target for the upstream response path: bytes from an upstream
// -> HttpParser(HTTP_RESPONSE) -> on every final head, what Exchange does
// before anything goes downstream: rewrite_response_headers,
// response_marks_exhausted, parse_retry_after, and the serialized head.
//
// Input: one flag byte, then the response bytes. Flag bit 0: the request was
// HEAD (on_head returns 1, no body); bit 1: the upstream closes after the
// bytes (finish(), close-delimited bodies end there).
//
// Invariants (abort on failure):
// - the rewritten fields serialize to clean "token: value\r\n" lines and the
//   status line has no CR/LF: no response splitting downstream;
// - no hop-by-hop, framing or Connection-listed field survives; the other
//   fields survive in order; exactly one Via, ending with ours;
// - the head as the shell writes it downstream (with its own framing) parses
//   again as one clean head with the same status and fields;
// - a Retry-After, when parsed, is within [0, kRetryAfterSaturation];
// - feeding the bytes in two pieces or one byte at a time gives the same
//   messages and the same error as feeding them at once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"
#include "core/http/http_headers.h"
#include "core/http/retry_after.h"
#include "fuzz_feed.h"
#include "fuzz_util.h"
#include "shell/http1/http_parser.h"

namespace {

using namespace onelayer;

constexpr std::string_view kVia = "1.1 onelayer";
const std::vector<std::string_view> kDropped = {"connection", "keep-alive", "proxy-connection", "te",
                                                "trailer",    "transfer-encoding", "upgrade", "content-length"};

bool dropped(std::string_view lname) {
  for (auto s : kDropped)
    if (s == lname) return true;
  return false;
}

struct HeadOnly : HttpParser::Handler {
  std::vector<MessageHead> heads;
  int on_head(MessageHead& head) override {
    heads.push_back(head);
    return 1;  // the head is all that is checked
  }
  int on_body(const char*, size_t) override { return 0; }
  int on_message_end() override { return HPE_PAUSED; }
};

void check_rewrite(const MessageHead& head, const Headers& out) {
  const Headers& in = head.headers;
  fuzz::require_clean_serialization(out);
  const auto listed = fuzz::list_members(in, "connection");
  for (const Header& f : out) {
    std::string n = fuzz::lower(f.name);
    FUZZ_REQUIRE(!dropped(n));
    if (n != "via") FUZZ_REQUIRE(!fuzz::in_list(listed, n));
  }
  std::vector<const Header*> expect;
  for (const Header& f : in) {
    std::string n = fuzz::lower(f.name);
    if (n == "via" || dropped(n) || fuzz::in_list(listed, n)) continue;
    if (!fuzz::token(f.name) || !fuzz::safe_value(f.value)) continue;
    expect.push_back(&f);
  }
  size_t k = 0;
  for (const Header& f : out) {
    if (fuzz::lower(f.name) == "via") continue;
    FUZZ_REQUIRE(k < expect.size() && *expect[k] == f);
    ++k;
  }
  FUZZ_REQUIRE(k == expect.size());
  FUZZ_REQUIRE(fuzz::count_named(out, "via") == 1);
  FUZZ_REQUIRE(fuzz::first_named(out, "via")->value.ends_with(kVia));
}

// Exchange::on_up_head's serialization, then a second parse of it.
void check_downstream_head(const MessageHead& head, const Headers& out, bool head_request) {
  const bool no_body = head_request || head.status == 204 || head.status == 304;
  // The shell writes the reason phrase only when it is clean, else the
  // standard one ("OK" stands for it here).
  std::string wire = "HTTP/1.1 " + std::to_string(head.status) + " " +
                     (is_clean_reason_phrase(head.reason) ? head.reason : "OK") + "\r\n";
  std::string_view line(wire.data(), wire.size() - 2);
  for (unsigned char c : line) FUZZ_REQUIRE(c == '\t' || (c >= 0x20 && c < 0x7f));  // no splitting, no escapes
  append_serialized(out, wire);
  bool framed = false;
  if (head.has_content_length && (!no_body || head_request || head.status == 304)) {
    wire += "Content-Length: " + std::to_string(head.content_length) + "\r\n";
    framed = true;
  } else if (!no_body) {
    wire += "Transfer-Encoding: chunked\r\n";
    framed = true;
  }
  wire += "\r\n";

  HeadOnly rec;
  HttpParser again(HTTP_RESPONSE, &rec);
  again.set_limits(1 << 20, 4096);
  again.feed(wire.data(), wire.size());
  FUZZ_REQUIRE(again.error() == HttpParser::Error::none || again.error() == HttpParser::Error::paused);
  FUZZ_REQUIRE(rec.heads.size() == 1);
  const MessageHead& h = rec.heads[0];
  FUZZ_REQUIRE(h.status == head.status);
  FUZZ_REQUIRE(!h.obs_fold);
  FUZZ_REQUIRE(h.headers.size() == out.size() + (framed ? 1 : 0));
  for (size_t i = 0; i < out.size(); ++i) FUZZ_REQUIRE(h.headers[i] == out[i]);
}

struct UpstreamModel : HttpParser::Handler {
  bool head_request = false;
  std::string transcript;
  std::string body;
  Headers out;
  bool informational = false;

  int on_head(MessageHead& head) override {
    transcript += "H:" + std::to_string(head.status) + " " + head.reason + " " + std::to_string(head.http_major) +
                  "." + std::to_string(head.http_minor) + (head.chunked ? " chunked" : "") +
                  (head.has_content_length ? " cl=" + std::to_string(head.content_length) : "") +
                  (head.keep_alive ? " ka" : "") + (head.obs_fold ? " fold" : "");
    for (const Header& f : head.headers) transcript += "\n" + f.name + ":" + f.value;
    transcript += "\n";
    FUZZ_REQUIRE(head.status >= 0 && head.status <= 999);
    FUZZ_REQUIRE(!(head.chunked && head.has_content_length));
    // llhttp accepts "HTTP/1.1 0 X" and "099": status-code is 3DIGIT >= 100
    // (RFC 9110 15), so the shell must treat these as a bad response (see
    // tests/integration/test_faults.py); the model does.
    if (head.status < 100) {
      transcript += "=reject status\n";
      return -1;
    }
    if (head.status < 200) {
      if (head.status == 101) return -1;  // Http1ClientConnection: Upgrade was stripped
      informational = true;
      return 0;
    }
    static const HeaderNames names;
    (void)response_marks_exhausted(head.headers, names);
    if (const Header* ra = find_header(head.headers, "retry-after")) {
      auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
      if (auto v = parse_retry_after(ra->value, now)) {
        FUZZ_REQUIRE(v->count() >= 0 && *v <= kRetryAfterSaturation);
      }
    }
    rewrite_response_headers(head.headers, kVia, out);
    check_rewrite(head, out);
    check_downstream_head(head, out, head_request);
    return head_request ? 1 : 0;
  }
  int on_body(const char* data, size_t len) override {
    body.append(data, len);
    return 0;
  }
  int on_message_end() override {
    transcript += "B:" + body + "|E\n";
    body.clear();
    if (informational) {
      informational = false;
      return 0;
    }
    return HPE_PAUSED;
  }
};

struct Run {
  std::string transcript;
  HttpParser::Error error;
};

Run run(std::string_view data, const std::vector<size_t>& cuts, bool head_request, bool eof) {
  UpstreamModel model;
  model.head_request = head_request;
  HttpParser p(HTTP_RESPONSE, &model);
  p.set_limits(8 * 1024, 256);
  HttpParser::Error e = fuzz::feed_pieces(p, data, cuts, eof);
  return Run{model.transcript + "B:" + model.body, e};
}

// Split reads must not change what the proxy sees; shows both on failure.
void require_same(const Run& whole, const Run& other, const char* how) {
  if (other.error == whole.error && other.transcript == whole.transcript) return;
  std::fprintf(stderr, "fed %s, the parse differs from one feed:\n--- one feed (error %d):\n%s\n--- %s (error %d):\n%s\n---\n",
               how, static_cast<int>(whole.error), whole.transcript.c_str(), how, static_cast<int>(other.error),
               other.transcript.c_str());
  FUZZ_REQUIRE(other.transcript == whole.transcript);
  FUZZ_REQUIRE(other.error == whole.error);
}

bool comparable(const Run& a, const Run& b) {
  return a.error != HttpParser::Error::head_too_large && b.error != HttpParser::Error::head_too_large;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool head_request = data[0] & 1;
  const bool eof = data[0] & 2;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  Run whole = run(in, {}, head_request, eof);
  if (in.size() < 2) return 0;
  size_t cut = 1 + (static_cast<size_t>(data[0] >> 2) * 131) % (in.size() - 1);
  Run split = run(in, {cut}, head_request, eof);
  if (comparable(whole, split)) require_same(whole, split, "in two pieces");
  if (in.size() <= 512) {
    std::vector<size_t> every;
    for (size_t i = 1; i < in.size(); ++i) every.push_back(i);
    Run bytes = run(in, every, head_request, eof);
    if (comparable(whole, bytes)) require_same(whole, bytes, "one byte at a time");
  }
  return 0;
}
