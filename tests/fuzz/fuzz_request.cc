// libFuzzer target for the downstream request path: raw bytes from a client
// -> HttpParser(HTTP_REQUEST) (the shell's llhttp wrapper) -> on every head,
// the checks and rewriting the shell does before forwarding:
// validate_request_headers, detect_outer_owner, incoming_timeout_ms and
// rewrite_request_headers in the three inner_hops modes.
//
// Invariants (abort on failure):
// - the rewritten header list serializes to clean "token: value\r\n" lines
//   (no CR/LF/NUL/CTL inside a line: no request splitting);
// - no hop-by-hop or framing field, nor a Connection-listed one, survives;
//   exactly one Host when one was received; the ordinary fields survive in
//   order and none is invented; the retry protocol fields are as docs/retries.md
//   says for each mode;
// - the request as the shell would forward it (request line, Host, fields,
//   its own framing) parses again as exactly one clean head with the same
//   method, target, fields and framing: what the origin reads is what the
//   proxy meant;
// - feeding the same bytes in two pieces, or one byte at a time, gives the
//   same messages and the same verdicts as feeding them at once (split reads
//   must not change meaning, e.g. must not look like obs-fold).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/http/baggage.h"
#include "core/config/config_loader.h"
#include "core/http/http_headers.h"
#include "core/request/request_validation.h"
#include "fuzz_feed.h"
#include "fuzz_util.h"
#include "shell/http1/http_parser.h"

namespace {

using namespace onelayer;

constexpr std::string_view kConfigYaml = R"(layer_id: fuzz
admin: { listen: 127.0.0.1:0 }
listeners:
  - name: main
    listen: 127.0.0.1:0
    routes:
      - name: all
        upstream: up
        retry: { max_attempts: 3 }
upstreams:
  - name: up
    endpoints: [127.0.0.1:9]
)";

constexpr uint64_t kMaxHeadBytes = 8 * 1024;
constexpr uint32_t kMaxHeaders = 128;  // what the shell passes to set_limits

const Config& test_config() {
  static const ConfigPtr cfg = [] {
    LoadResult r = load_config_string(kConfigYaml, "fuzz.yaml");
    FUZZ_REQUIRE(r.ok());
    return r.config;
  }();
  return *cfg;
}

// Never forwarded: the hop-by-hop set, the framing, and Expect (the proxy
// answers 100-continue itself).
const std::vector<std::string_view> kHopByHop = {"connection", "keep-alive",        "proxy-connection",
                                                 "te",         "trailer",           "transfer-encoding",
                                                 "upgrade",    "content-length",    "expect"};
const std::vector<std::string_view> kForeign = {
    "x-envoy-retry-on", "x-envoy-retry-grpc-on", "x-envoy-max-retries", "x-envoy-retriable-status-codes",
    "x-envoy-retriable-header-names", "x-envoy-hedge-on-per-try-timeout",
    "x-envoy-upstream-rq-per-try-timeout-ms", "l5d-retry-http", "l5d-retry-grpc", "l5d-retry-limit",
    "l5d-retry-timeout"};
// Fields the rewrite itself writes or merges.
const std::vector<std::string_view> kWritten = {"via", "x-forwarded-for", "x-forwarded-proto", "baggage",
                                                "x-retry-owner", "x-retry-attempt", "x-envoy-max-retries",
                                                "x-request-timeout-ms"};

bool one_of(const std::vector<std::string_view>& set, std::string_view lname) {
  for (auto s : set)
    if (s == lname) return true;
  return false;
}

// Records the heads a second parse of the forwarded bytes delivers.
struct Recorder : HttpParser::Handler {
  std::vector<MessageHead> heads;
  int on_head(MessageHead& head) override {
    heads.push_back(head);
    return 0;
  }
  int on_body(const char*, size_t) override { return 0; }
  int on_message_end() override { return HPE_PAUSED; }
};

void check_rewrite(const MessageHead& head, const Headers& out, const RequestRewrite& rw) {
  const Headers& in = head.headers;
  fuzz::require_clean_serialization(out);
  const auto listed = fuzz::list_members(in, "connection");
  const bool strip = rw.inner_hops != InnerHops::pass;
  const bool claiming = rw.inner_hops == InnerHops::forbid && rw.claim_ownership;

  for (const Header& f : out) {
    std::string n = fuzz::lower(f.name);
    FUZZ_REQUIRE(fuzz::token(f.name) && fuzz::safe_value(f.value));
    FUZZ_REQUIRE(!one_of(kHopByHop, n));
    if (fuzz::in_list(listed, n)) {
      // Only protected or proxy-written fields may carry a Connection-listed name.
      FUZZ_REQUIRE(n == "host" || one_of(kWritten, n));
    }
    if (strip && one_of(kForeign, n)) FUZZ_REQUIRE(n == "x-envoy-max-retries" && f.value == "0");
  }
  FUZZ_REQUIRE(fuzz::count_named(out, "host") == fuzz::count_named(in, "host"));

  // Ordinary fields: exactly the surviving input fields, in order.
  std::vector<const Header*> expect;
  for (const Header& f : in) {
    std::string n = fuzz::lower(f.name);
    if (one_of(kWritten, n) || one_of(kHopByHop, n)) continue;
    if (!fuzz::token(f.name) || !fuzz::safe_value(f.value)) continue;
    if (fuzz::in_list(listed, n) && n != "host") continue;
    if (strip && one_of(kForeign, n)) continue;
    expect.push_back(&f);
  }
  size_t k = 0;
  for (const Header& f : out) {
    if (one_of(kWritten, fuzz::lower(f.name))) continue;
    FUZZ_REQUIRE(k < expect.size() && *expect[k] == f);
    ++k;
  }
  FUZZ_REQUIRE(k == expect.size());

  // Appended list fields: one field each, our member last.
  FUZZ_REQUIRE(fuzz::count_named(out, "via") == 1);
  FUZZ_REQUIRE(fuzz::first_named(out, "via")->value.ends_with("1.1 onelayer"));
  FUZZ_REQUIRE(fuzz::count_named(out, "x-forwarded-for") == 1);
  FUZZ_REQUIRE(fuzz::first_named(out, "x-forwarded-for")->value.ends_with(rw.client_ip));

  if (rw.time_left_ms >= 0) {
    FUZZ_REQUIRE(fuzz::count_named(out, "x-request-timeout-ms") == 1);
    FUZZ_REQUIRE(fuzz::first_named(out, "x-request-timeout-ms")->value == std::to_string(rw.time_left_ms));
  }
  if (claiming) {
    FUZZ_REQUIRE(fuzz::count_named(out, "x-retry-owner") == 1);
    FUZZ_REQUIRE(fuzz::first_named(out, "x-retry-owner")->value == "fuzz");
    FUZZ_REQUIRE(fuzz::count_named(out, "x-retry-attempt") == 1);
    FUZZ_REQUIRE(fuzz::first_named(out, "x-retry-attempt")->value == std::to_string(rw.attempt));
    FUZZ_REQUIRE(fuzz::count_named(out, "x-envoy-max-retries") == 1);
    FUZZ_REQUIRE(fuzz::count_named(out, "baggage") <= 1);
    // The member is there unless the merge would have passed the size limit.
    std::string in_bag;
    for (const Header& f : in)
      if (fuzz::lower(f.name) == "baggage") in_bag += (in_bag.empty() ? "" : ",") + f.value;
    if (in_bag.size() + 64 < kMaxBaggageBytes) {
      const Header* b = fuzz::first_named(out, "baggage");
      FUZZ_REQUIRE(b != nullptr);
      auto got = baggage_get(b->value, "retry-owner");
      FUZZ_REQUIRE(got && *got == "fuzz");
    }
  } else if (rw.inner_hops == InnerHops::pass) {
    // pass: the protocol fields go through untouched (timeout aside).
    for (std::string_view n : {"x-retry-owner", "x-retry-attempt", "x-envoy-max-retries"}) {
      size_t valid_in = 0;
      for (const Header& f : in)
        if (fuzz::lower(f.name) == n && fuzz::token(f.name) && fuzz::safe_value(f.value) &&
            (!fuzz::in_list(listed, n) || n != "x-envoy-max-retries"))
          ++valid_in;
      FUZZ_REQUIRE(fuzz::count_named(out, n) == valid_in);
    }
  }
}

// Serializes the head as Exchange::send_head_and_body does, then parses it
// again: it must be one clean head meaning the same thing.
void check_forwarded(const MessageHead& head, const Headers& out, std::string_view target) {
  std::string wire = head.method + " " + std::string(target) + " HTTP/1.1\r\n";
  bool add_host = fuzz::first_named(out, "host") == nullptr;
  if (add_host) wire += "Host: 127.0.0.1:9\r\n";
  append_serialized(out, wire);
  if (head.chunked) {
    wire += "Transfer-Encoding: chunked\r\n";
  } else if (head.has_content_length) {
    wire += "Content-Length: " + std::to_string(head.content_length) + "\r\n";
  }
  wire += "\r\n";

  // The request line itself cannot be split either.
  std::string_view line(wire.data(), wire.find("\r\n"));
  FUZZ_REQUIRE(line.find('\n') == std::string_view::npos && line.find('\r') == std::string_view::npos);
  // Visible ASCII only: a TAB, or a byte like 0xA0 (whitespace to Unicode-aware
  // parsers), would split the upstream's request line differently.
  for (unsigned char c : target) FUZZ_REQUIRE(c > 0x20 && c < 0x7F);

  Recorder rec;
  HttpParser again(HTTP_REQUEST, &rec);
  again.set_limits(1 << 20, 4096);
  again.feed(wire.data(), wire.size());
  FUZZ_REQUIRE(again.error() == HttpParser::Error::none || again.error() == HttpParser::Error::paused);
  FUZZ_REQUIRE(rec.heads.size() == 1);
  const MessageHead& h = rec.heads[0];
  FUZZ_REQUIRE(h.method == head.method);
  FUZZ_REQUIRE(h.target == target);
  FUZZ_REQUIRE(!h.obs_fold);
  FUZZ_REQUIRE(h.chunked == head.chunked);
  FUZZ_REQUIRE(h.has_content_length == (head.has_content_length && !head.chunked));
  if (h.has_content_length) FUZZ_REQUIRE(h.content_length == head.content_length);
  FUZZ_REQUIRE(h.headers.size() == out.size() + (add_host ? 1 : 0) + (head.chunked || head.has_content_length ? 1 : 0));
  for (size_t i = 0; i < out.size(); ++i) FUZZ_REQUIRE(h.headers[i + (add_host ? 1 : 0)] == out[i]);
  FUZZ_REQUIRE(validate_request_headers(h.headers, true, 0) == RequestHeaderProblem::none);
}

// The shell's on_head, with the checks above in place of routing.
struct ProxyModel : HttpParser::Handler {
  std::string transcript;
  Headers out;
  bool forwarded_open = false;  // a forwarded request whose message has not ended

  int on_head(MessageHead& head) override {
    transcript += "H:" + head.method + " " + head.target + " " + std::to_string(head.http_major) + "." +
                  std::to_string(head.http_minor) + (head.chunked ? " chunked" : "") +
                  (head.has_content_length ? " cl=" + std::to_string(head.content_length) : "") +
                  (head.keep_alive ? " ka" : "") + (head.obs_fold ? " fold" : "");
    for (const Header& f : head.headers) transcript += "\n" + f.name + ":" + f.value;
    transcript += "\n";
    const bool http11 = head.http_major == 1 && head.http_minor >= 1;
    // llhttp itself refuses what would make the framing ambiguous.
    FUZZ_REQUIRE(!(head.chunked && head.has_content_length));
    FUZZ_REQUIRE(fuzz::count_named(head.headers, "content-length") <= 1);
    FUZZ_REQUIRE(head.headers.size() <= kMaxHeaders);

    // The shell's own verdict (core/request/request_validation), with the default
    // underscore policy.
    RequestHeadFacts facts{head.method, head.target, head.http_major, head.http_minor, head.obs_fold,
                           head.chunked, head.has_content_length, head.content_length, head.checked_by_codec};
    RequestVerdict v = check_request_head(facts, head.headers, UnderscoreHeaders::drop);
    transcript += std::string("=") + (v.refused() ? v.detail : "ok") + "\n";
    if (v.refused()) {
      FUZZ_REQUIRE(v.status == 400);
      return -1;
    }
    // Accepted: every field is a clean token/value without an underscore,
    // Host is unique (and there on HTTP/1.1), the length is one every hop
    // reads alike, and an absolute-form authority is the Host.
    FUZZ_REQUIRE(head.method != "CONNECT");
    FUZZ_REQUIRE(!head.obs_fold);
    for (const Header& f : head.headers) {
      FUZZ_REQUIRE(fuzz::token(f.name) && fuzz::safe_value(f.value));
      FUZZ_REQUIRE(f.name.find('_') == std::string::npos);
    }
    FUZZ_REQUIRE(fuzz::count_named(head.headers, "host") <= 1);
    if (http11) FUZZ_REQUIRE(fuzz::count_named(head.headers, "host") == 1);
    if (head.has_content_length) FUZZ_REQUIRE(head.content_length <= kMaxContentLength);
    if (!head.target.empty() && head.target[0] != '/' && head.target != "*") {
      const Header* host = fuzz::first_named(head.headers, "host");
      FUZZ_REQUIRE(host && host->value == v.host);
    }
    const std::string& target = v.upstream_target;
    const Config& cfg = test_config();
    RetryOwnership own = detect_outer_owner(head.headers, cfg.headers);
    if (own.outer_owned) FUZZ_REQUIRE(!own.owner.empty());
    if (auto t = incoming_timeout_ms(head.headers, cfg.headers)) FUZZ_REQUIRE(*t >= 0 && *t < 1'000'000'000'000'000'000);

    struct Mode {
      InnerHops hops;
      bool claim;
      int64_t time_left;
    };
    const uint32_t attempt = 1 + static_cast<uint32_t>(head.headers.size() % 3);
    for (Mode m : {Mode{InnerHops::forbid, !own.outer_owned, 1234}, Mode{InnerHops::strip, false, 0},
                   Mode{InnerHops::pass, false, -1}}) {
      RequestRewrite rw;
      rw.config = &cfg;
      rw.inner_hops = m.hops;
      rw.claim_ownership = m.claim;
      rw.outer_owned = own.outer_owned;
      rw.attempt = attempt;
      rw.time_left_ms = m.time_left;
      rw.client_ip = "10.1.2.3";
      rewrite_request_headers(head.headers, rw, out);
      check_rewrite(head, out, rw);
      check_forwarded(head, out, target);
    }
    forwarded_open = true;
    return 0;
  }
  // Body bytes are joined per message: how they were cut is not meaning.
  std::string body;
  int on_body(const char* data, size_t len) override {
    body.append(data, len);
    return 0;
  }
  int on_message_end() override {
    transcript += "B:" + body + "|E\n";
    body.clear();
    forwarded_open = false;
    return HPE_PAUSED;
  }
};

struct Run {
  std::string transcript;
  HttpParser::Error error;
};

Run run(std::string_view data, const std::vector<size_t>& cuts) {
  ProxyModel model;
  HttpParser p(HTTP_REQUEST, &model);
  p.set_limits(kMaxHeadBytes, kMaxHeaders);
  HttpParser::Error e = fuzz::feed_pieces(p, data, cuts, false);
  // llhttp checks Transfer-Encoding only after on_headers_complete returns:
  // a head the shell forwards from inside that callback must not be refused
  // afterwards (the upstream would run a request the client is told failed).
  if (model.forwarded_open && e == HttpParser::Error::parse) {
    std::string_view why = p.error_reason();
    if (why == "Request has invalid `Transfer-Encoding`") {
      std::fprintf(stderr, "head forwarded, then refused by llhttp: %s\n", p.error_reason());
      FUZZ_REQUIRE(!"a forwarded head was refused after on_head");
    }
  }
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
  // The head byte count includes 4 bytes per header-name callback, so a
  // split inside a name can move the 431 boundary by a few bytes.
  return a.error != HttpParser::Error::head_too_large && b.error != HttpParser::Error::head_too_large;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  Run whole = run(in, {});
  if (size < 2) return 0;

  // A cut somewhere depending on the content, so the fuzzer can move it.
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size && i < 64; ++i) h = (h ^ data[i]) * 16777619u;
  size_t cut = 1 + h % (size - 1);
  Run split = run(in, {cut});
  if (comparable(whole, split)) require_same(whole, split, "in two pieces");
  if (size <= 512) {
    std::vector<size_t> every;
    for (size_t i = 1; i < size; ++i) every.push_back(i);
    Run bytes = run(in, every);
    if (comparable(whole, bytes)) require_same(whole, bytes, "one byte at a time");
  }
  return 0;
}
