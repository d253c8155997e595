#include "core/http/http_headers.h"

#include <doctest/doctest.h>

#include <cctype>
#include <string>
#include <vector>

#include "core/http/baggage.h"

using namespace onelayer;

namespace {

const std::vector<std::string> kForeignDirectives = {
    "x-envoy-retry-on",
    "x-envoy-retry-grpc-on",
    "x-envoy-max-retries",
    "x-envoy-retriable-status-codes",
    "x-envoy-retriable-header-names",
    "x-envoy-hedge-on-per-try-timeout",
    "x-envoy-upstream-rq-per-try-timeout-ms",
    "l5d-retry-http",
    "l5d-retry-grpc",
    "l5d-retry-limit",
    "l5d-retry-timeout",
};

Config make_config(std::string layer = "orders", bool baggage = true) {
  Config c;
  c.layer_id = std::move(layer);
  c.propagate_baggage = baggage;
  return c;
}

// Only the rules under test: no Via / XFF / XFP unless a test sets them.
RequestRewrite bare_rewrite(const Config& c, InnerHops mode) {
  RequestRewrite rw{&c};
  rw.inner_hops = mode;
  rw.proto = "";
  rw.via = "";
  return rw;
}

// forbid + claim_ownership, with an attempt number and baggage attempt id.
RequestRewrite claiming_rewrite(const Config& c, uint32_t attempt, uint64_t attempt_id) {
  RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
  rw.claim_ownership = true;
  rw.attempt = attempt;
  rw.attempt_id = attempt_id;
  return rw;
}

Headers rewrite(const Headers& in, const RequestRewrite& rw) {
  Headers out{Header{"stale", "x"}};  // proves out is cleared
  rewrite_request_headers(in, rw, out);
  return out;
}

std::string value_of(const Headers& h, std::string_view name) {
  const Header* f = find_header(h, name);
  return f ? f->value : std::string("<absent>");
}

std::string serialize(const Headers& h) {
  std::string s;
  append_serialized(h, s);
  return s;
}

}  // namespace

TEST_SUITE("header primitives") {
  TEST_CASE("iequals ignores ASCII case only") {
    CHECK(iequals("Content-Length", "content-LENGTH"));
    CHECK(iequals("", ""));
    CHECK_FALSE(iequals("host", "hos"));
    CHECK_FALSE(iequals("a-b", "a_b"));
    CHECK_FALSE(iequals("\xC3\xA9", "\xC3\x89"));  // no Unicode folding
  }

  TEST_CASE("copy_lowercase lowers ASCII capitals only, into another buffer or in place") {
    std::string in = "Content-TYPE_x9\xC3\x89";
    std::string out(in.size() + 2, '#');
    char* end = copy_lowercase(in, out.data());
    CHECK(end == out.data() + in.size());
    CHECK(out == "content-type_x9\xC3\x89##");  // no Unicode folding, nothing past the end
    copy_lowercase(in, in.data());
    CHECK(in == "content-type_x9\xC3\x89");
    CHECK(copy_lowercase("", out.data()) == out.data());
    std::string all;
    for (int c = 1; c < 256; ++c) all += static_cast<char>(c);
    copy_lowercase(all, all.data());
    for (int c = 1; c < 256; ++c) {
      CAPTURE(c);
      bool upper = c >= 'A' && c <= 'Z';
      CHECK(static_cast<unsigned char>(all[c - 1]) == (upper ? c + 32 : c));
    }
  }

  TEST_CASE("parse_content_length takes 1 to max_digits digits and nothing else") {
    CHECK(parse_content_length("0", 16) == 0u);
    CHECK(parse_content_length("0012", 16) == 12u);
    CHECK(parse_content_length("9007199254740991", 16) == 9007199254740991u);  // 2^53-1
    CHECK(parse_content_length("9999999999999999", 16) == 9999999999999999u);
    CHECK_FALSE(parse_content_length("10000000000000000", 16));  // 17 digits
    CHECK_FALSE(parse_content_length("", 16));
    for (const char* bad : {"+1", "-1", " 1", "1 ", "1,1", "0x10", "1.0", "1\t"}) {
      CAPTURE(bad);
      CHECK_FALSE(parse_content_length(bad, 16));
    }
  }

  TEST_CASE("parse_content_length never overflows: the bound stops at 19 digits") {
    CHECK(parse_content_length("9999999999999999999", 19) == 9999999999999999999u);
    CHECK(parse_content_length("18446744073709551615", 19) == std::nullopt);  // 2^64-1 has 20 digits
    CHECK(parse_content_length("99999999999999999999", 25) == std::nullopt);  // 20 nines would wrap
    CHECK(parse_content_length("123", 3) == 123u);
    CHECK_FALSE(parse_content_length("1234", 3));
    CHECK_FALSE(parse_content_length("1", 0));
  }

  TEST_CASE("is_token accepts tchar and rejects separators, space and empty") {
    CHECK(is_token("X-Custom_Header.1"));
    CHECK(is_token("!#$%&'*+-.^_`|~09azAZ"));
    CHECK_FALSE(is_token(""));
    CHECK_FALSE(is_token("Bad Name"));
    for (char c : std::string("\"(),/:;<=>?@[\\]{}\t")) {
      CAPTURE(c);
      CHECK_FALSE(is_token(std::string("a") + c));
    }
    CHECK_FALSE(is_token("caf\xC3\xA9"));
  }

  TEST_CASE("is_valid_field_value rejects CR LF NUL and other CTLs, allows HTAB and obs-text") {
    CHECK(is_valid_field_value("text/html; q=0.9"));
    CHECK(is_valid_field_value("a\tb"));
    CHECK(is_valid_field_value("caf\xC3\xA9"));
    CHECK(is_valid_field_value(""));
    CHECK_FALSE(is_valid_field_value("a\rb"));
    CHECK_FALSE(is_valid_field_value("a\nb"));
    CHECK_FALSE(is_valid_field_value(std::string("a\0b", 3)));
    CHECK_FALSE(is_valid_field_value("a\x01"));
    CHECK_FALSE(is_valid_field_value("a\x7F"));
  }

  TEST_CASE("find_header returns the first match case-insensitively, count_headers counts all") {
    Headers h{{"Accept", "1"}, {"ACCEPT", "2"}, {"Host", "h"}};
    REQUIRE(find_header(h, "accept") != nullptr);
    CHECK(find_header(h, "accept")->value == "1");
    CHECK(find_header(h, "missing") == nullptr);
    CHECK(count_headers(h, "Accept") == 2);
    CHECK(count_headers(h, "host") == 1);
    CHECK(count_headers(h, "nope") == 0);
  }

  TEST_CASE("is_hop_by_hop covers the fixed set in any case") {
    Headers none;
    for (const char* n : {"Connection", "keep-alive", "PROXY-CONNECTION", "TE", "Trailer", "transfer-encoding", "Upgrade"}) {
      CAPTURE(n);
      CHECK(is_hop_by_hop(n, none));
    }
    CHECK_FALSE(is_hop_by_hop("Content-Length", none));
    CHECK_FALSE(is_hop_by_hop("Trailers", none));
    CHECK_FALSE(is_hop_by_hop("Host", none));
  }

  TEST_CASE("is_hop_by_hop includes names listed in every Connection field") {
    Headers h{{"Connection", " close , X-Secret,,\tX-Other "}, {"connection", "x-third"}};
    CHECK(is_hop_by_hop("x-secret", h));
    CHECK(is_hop_by_hop("X-OTHER", h));
    CHECK(is_hop_by_hop("X-Third", h));
    CHECK(is_hop_by_hop("close", h));
    CHECK_FALSE(is_hop_by_hop("X-Secre", h));
    CHECK_FALSE(is_hop_by_hop("", h));
  }
}

TEST_SUITE("validate_request_headers") {
  const Headers good{{"Host", "example.com"}, {"Accept", "*/*"}};

  TEST_CASE("well-formed HTTP/1.1 request has no problem") {
    CHECK(validate_request_headers(good, true, 100) == RequestHeaderProblem::none);
  }

  TEST_CASE("space inside a header name is invalid_name") {
    Headers h = good;
    h.push_back({"Bad Name", "1"});
    CHECK(validate_request_headers(h, true, 100) == RequestHeaderProblem::invalid_name);
  }

  TEST_CASE("empty or separator-bearing header name is invalid_name") {
    CHECK(validate_request_headers({{"Host", "a"}, {"", "1"}}, true, 100) == RequestHeaderProblem::invalid_name);
    CHECK(validate_request_headers({{"Host", "a"}, {"X:Y", "1"}}, true, 100) == RequestHeaderProblem::invalid_name);
  }

  TEST_CASE("CR, LF or NUL in a value is invalid_value") {
    CHECK(validate_request_headers({{"Host", "a"}, {"X", "a\rb"}}, true, 100) == RequestHeaderProblem::invalid_value);
    CHECK(validate_request_headers({{"Host", "a"}, {"X", "a\nb"}}, true, 100) == RequestHeaderProblem::invalid_value);
    CHECK(validate_request_headers({{"Host", "a"}, {"X", std::string("a\0b", 3)}}, true, 100) ==
          RequestHeaderProblem::invalid_value);
  }

  TEST_CASE("a fold kept in the value by the parser wrapper is obs_fold") {
    CHECK(validate_request_headers({{"Host", "a"}, {"X", "a\r\n b"}}, true, 100) == RequestHeaderProblem::obs_fold);
    CHECK(validate_request_headers({{"Host", "a"}, {"X", "a\r\n\tb"}}, true, 100) == RequestHeaderProblem::obs_fold);
  }

  TEST_CASE("HTTP/1.1 without Host is missing_host, HTTP/1.0 without Host is fine") {
    Headers h{{"Accept", "*/*"}};
    CHECK(validate_request_headers(h, true, 100) == RequestHeaderProblem::missing_host);
    CHECK(validate_request_headers(h, false, 100) == RequestHeaderProblem::none);
  }

  TEST_CASE("two Host fields are duplicate_host in any version and any case") {
    Headers h{{"Host", "a"}, {"HOST", "a"}};
    CHECK(validate_request_headers(h, true, 100) == RequestHeaderProblem::duplicate_host);
    CHECK(validate_request_headers(h, false, 100) == RequestHeaderProblem::duplicate_host);
  }

  TEST_CASE("fields the codec checked are not checked again, their Host fields and count are") {
    const Header* host = nullptr;
    // Bytes the codec would have refused pass: only the caller's word says they are fine.
    Headers h{{"Host", "a"}, {"Bad Name", "a\nb"}};
    CHECK(validate_request_headers(h, true, 10, &host, true) == RequestHeaderProblem::none);
    CHECK(host == &h[0]);
    CHECK(validate_request_headers(h, true, 10, &host, false) == RequestHeaderProblem::invalid_name);
    CHECK(validate_request_headers({{"Host", "a"}, {"host", "b"}}, true, 10, &host, true) ==
          RequestHeaderProblem::duplicate_host);
    CHECK(validate_request_headers({{"Host", "a b"}}, true, 10, &host, true) == RequestHeaderProblem::invalid_value);
    CHECK(validate_request_headers({{"x", "1"}}, true, 10, &host, true) == RequestHeaderProblem::missing_host);
    CHECK(validate_request_headers({{"Host", "a"}, {"x", "1"}}, true, 1, &host, true) ==
          RequestHeaderProblem::too_many_headers);
  }

  TEST_CASE("more fields than max_headers is too_many_headers, 0 means no limit") {
    CHECK(validate_request_headers(good, true, 2) == RequestHeaderProblem::none);
    CHECK(validate_request_headers(good, true, 1) == RequestHeaderProblem::too_many_headers);
    CHECK(validate_request_headers(good, true, 0) == RequestHeaderProblem::none);
  }

  TEST_CASE("Host values that are not uri-host[:port] are invalid_value") {
    for (const char* bad : {"a b", "a/b", "user@host", "host:80x", "[::1", "[]", "h:1:2", "a%zz", "[::1]x"}) {
      CAPTURE(bad);
      CHECK(validate_request_headers({{"Host", bad}}, true, 10) == RequestHeaderProblem::invalid_value);
    }
    for (const char* ok : {"example.com", "example.com:8080", "127.0.0.1:80", "[::1]:80", "[fe80::1%25eth0]", "", "h:",
                           "a%2Db"}) {
      CAPTURE(ok);
      CHECK(validate_request_headers({{"Host", ok}}, true, 10) == RequestHeaderProblem::none);
    }
  }

  TEST_CASE("the first problem in field order is reported") {
    Headers h{{"Bad Name", "1"}, {"X", "a\nb"}};
    CHECK(validate_request_headers(h, true, 100) == RequestHeaderProblem::invalid_name);
  }

  TEST_CASE("the Host field is handed back when there is no problem, else nothing") {
    const Header* host = &good[0];
    Headers h{{"Accept", "*/*"}, {"hoSt", "example.com"}};
    CHECK(validate_request_headers(h, true, 100, &host) == RequestHeaderProblem::none);
    CHECK(host == &h[1]);
    CHECK(validate_request_headers({{"Accept", "*/*"}}, false, 100, &host) == RequestHeaderProblem::none);
    CHECK(host == nullptr);
    host = &h[0];
    CHECK(validate_request_headers({{"Host", "a"}, {"Host", "a"}}, true, 100, &host) == RequestHeaderProblem::duplicate_host);
    CHECK(host == nullptr);
    host = &h[0];
    CHECK(validate_request_headers({{"Host", "a b"}}, true, 100, &host) == RequestHeaderProblem::invalid_value);
    CHECK(host == nullptr);
  }

  TEST_CASE("to_string names each problem") {
    CHECK(std::string(to_string(RequestHeaderProblem::obs_fold)) == "obs_fold");
    CHECK(std::string(to_string(RequestHeaderProblem::duplicate_host)) == "duplicate_host");
  }
}

TEST_SUITE("detect_outer_owner") {
  const HeaderNames names;

  TEST_CASE("x-retry-owner header makes the request outer-owned, any case") {
    auto r = detect_outer_owner({{"X-Retry-Owner", "edge"}}, names);
    CHECK(r.outer_owned);
    CHECK(r.owner == "edge");
  }

  TEST_CASE("x-retry-owner wins over a baggage member") {
    auto r = detect_outer_owner({{"baggage", "retry-owner=b"}, {"x-retry-owner", "a"}}, names);
    CHECK(r.owner == "a");
  }

  TEST_CASE("baggage member with properties, whitespace, encoding and other members is detected") {
    auto r = detect_outer_owner({{"Baggage", "userId=alice , retry-owner = edge%20gw ;ttl=3;x , tenant=1"}}, names);
    CHECK(r.outer_owned);
    CHECK(r.owner == "edge gw");
  }

  TEST_CASE("baggage member in a second baggage field is detected") {
    auto r = detect_outer_owner({{"baggage", "a=1"}, {"baggage", "retry-owner=edge"}}, names);
    CHECK(r.outer_owned);
    CHECK(r.owner == "edge");
  }

  TEST_CASE("no header and no member: not owned") {
    CHECK_FALSE(detect_outer_owner({{"Host", "h"}, {"baggage", "a=1"}}, names).outer_owned);
    CHECK_FALSE(detect_outer_owner({}, names).outer_owned);
  }

  TEST_CASE("empty owner values do not count") {
    CHECK_FALSE(detect_outer_owner({{"x-retry-owner", ""}}, names).outer_owned);
    CHECK_FALSE(detect_outer_owner({{"baggage", "retry-owner="}}, names).outer_owned);
  }

  TEST_CASE("empty x-retry-owner falls through to baggage") {
    auto r = detect_outer_owner({{"x-retry-owner", ""}, {"baggage", "retry-owner=edge"}}, names);
    CHECK(r.owner == "edge");
  }

  TEST_CASE("malformed baggage does not make the request owned and does not throw") {
    CHECK_FALSE(detect_outer_owner({{"baggage", "retry-owner"}}, names).outer_owned);
    CHECK_FALSE(detect_outer_owner({{"baggage", ",,;;==,retry-owner=a b"}}, names).outer_owned);
    CHECK_FALSE(detect_outer_owner({{"baggage", "Retry-Owner=edge"}}, names).outer_owned);  // keys are case-sensitive
  }

  TEST_CASE("configured header names are used instead of the defaults") {
    HeaderNames custom;
    custom.retry_owner = "x-owner";
    custom.baggage_member = "owner";
    CHECK_FALSE(detect_outer_owner({{"x-retry-owner", "edge"}}, custom).outer_owned);
    CHECK(detect_outer_owner({{"X-Owner", "edge"}}, custom).outer_owned);
    CHECK(detect_outer_owner({{"baggage", "owner=edge"}}, custom).owner == "edge");
  }
}

TEST_SUITE("incoming_timeout_ms") {
  const HeaderNames names;

  TEST_CASE("non-negative integer is returned") {
    CHECK(incoming_timeout_ms({{"X-Request-Timeout-Ms", "1500"}}, names) == std::optional<int64_t>(1500));
    CHECK(incoming_timeout_ms({{"x-request-timeout-ms", "0"}}, names) == std::optional<int64_t>(0));
    CHECK(incoming_timeout_ms({{"x-request-timeout-ms", "007"}}, names) == std::optional<int64_t>(7));
  }

  TEST_CASE("anything that is not plain digits gives nullopt") {
    for (const char* bad : {"-5", "+5", "1.5", "abc", "", "10ms", "1 0", "1,2", "99999999999999999999"}) {
      CAPTURE(bad);
      CHECK_FALSE(incoming_timeout_ms({{"x-request-timeout-ms", bad}}, names).has_value());
    }
  }

  TEST_CASE("absent header gives nullopt") { CHECK_FALSE(incoming_timeout_ms({{"Host", "h"}}, names).has_value()); }

  TEST_CASE("several fields: the smallest valid one") {
    Headers h{{"x-request-timeout-ms", "900"}, {"x-request-timeout-ms", "junk"}, {"x-request-timeout-ms", "300"}};
    CHECK(incoming_timeout_ms(h, names) == std::optional<int64_t>(300));
  }
}

TEST_SUITE("rewrite_request_headers: hop-by-hop, framing, Via, X-Forwarded") {
  TEST_CASE("hop-by-hop, Connection-listed and framing fields are dropped, the rest kept in order with Host") {
    const Config c = make_config();
    Headers in{{"Host", "inv"},
               {"Connection", "keep-alive, X-Hop"},
               {"Keep-Alive", "timeout=5"},
               {"X-Hop", "secret"},
               {"Accept", "*/*"},
               {"Proxy-Connection", "keep-alive"},
               {"TE", "trailers"},
               {"Trailer", "X-T"},
               {"Upgrade", "websocket"},
               {"Transfer-Encoding", "chunked"},
               {"Content-Length", "5"},
               {"X-App", "1"}};
    Headers out = rewrite(in, bare_rewrite(c, InnerHops::pass));
    CHECK(serialize(out) == "Host: inv\r\nAccept: */*\r\nX-App: 1\r\n");
  }

  TEST_CASE("Expect is not forwarded: the proxy answered 100-continue itself, in every mode") {
    const Config c = make_config();
    for (InnerHops mode : {InnerHops::pass, InnerHops::strip, InnerHops::forbid}) {
      Headers out = rewrite({{"Host", "inv"}, {"Expect", "100-continue"}, {"expect", "100-continue"}, {"X-App", "1"}},
                            bare_rewrite(c, mode));
      CHECK(find_header(out, "expect") == nullptr);
      CHECK(find_header(out, "x-app") != nullptr);
      std::string direct;
      append_rewritten_request_headers({{"Host", "inv"}, {"Expect", "100-continue"}}, bare_rewrite(c, mode), direct);
      CHECK(direct.find("Expect") == std::string::npos);
    }
    Headers resp;
    rewrite_response_headers({{"Expect", "odd but harmless"}}, "", resp);
    CHECK(resp.size() == 1);  // responses are not touched
  }

  TEST_CASE("a Connection option cannot remove Host or the protocol fields") {
    const Config c = make_config();
    Headers in{{"Host", "inv"},
               {"Connection", "host, x-retry-owner, baggage, x-retry-attempt, x-request-timeout-ms, x-gone"},
               {"x-retry-owner", "edge"},
               {"x-retry-attempt", "2"},
               {"baggage", "retry-owner=edge"},
               {"x-request-timeout-ms", "100"},
               {"x-gone", "1"}};
    Headers out = rewrite(in, bare_rewrite(c, InnerHops::forbid));
    CHECK(serialize(out) ==
          "Host: inv\r\nx-retry-owner: edge\r\nx-retry-attempt: 2\r\nbaggage: retry-owner=edge\r\n"
          "x-request-timeout-ms: 100\r\n");
  }

  TEST_CASE("fields with invalid names or values are never forwarded") {
    const Config c = make_config();
    Headers in{{"Host", "h"}, {"Bad Name", "1"}, {"X-Inject", "a\r\nEvil: 1"}, {"X-Ok", "1"}};
    CHECK(serialize(rewrite(in, bare_rewrite(c, InnerHops::pass))) == "Host: h\r\nX-Ok: 1\r\n");
  }

  TEST_CASE("Via, X-Forwarded-For and X-Forwarded-Proto are created when absent") {
    const Config c = make_config();
    RequestRewrite rw{&c};
    rw.inner_hops = InnerHops::pass;
    rw.client_ip = "10.0.0.7";
    Headers out = rewrite({{"Host", "h"}}, rw);
    CHECK(serialize(out) == "Host: h\r\nVia: 1.1 onelayer\r\nX-Forwarded-For: 10.0.0.7\r\nX-Forwarded-Proto: http\r\n");
  }

  TEST_CASE("Via and X-Forwarded-* are comma-joined onto existing fields, several merged into the first") {
    const Config c = make_config();
    RequestRewrite rw{&c};
    rw.inner_hops = InnerHops::pass;
    rw.client_ip = "10.0.0.7";
    Headers in{{"via", "1.0 edge"},
               {"X-Forwarded-For", "1.2.3.4"},
               {"Accept", "*/*"},
               {"x-forwarded-for", "5.6.7.8"},
               {"X-Forwarded-Proto", "https"}};
    Headers out = rewrite(in, rw);
    CHECK(serialize(out) ==
          "via: 1.0 edge, 1.1 onelayer\r\nX-Forwarded-For: 1.2.3.4, 5.6.7.8, 10.0.0.7\r\nAccept: */*\r\n"
          "X-Forwarded-Proto: https, http\r\n");
  }

  TEST_CASE("empty client_ip, proto and via append nothing") {
    const Config c = make_config();
    Headers out = rewrite({{"Host", "h"}}, bare_rewrite(c, InnerHops::pass));
    CHECK(count_headers(out, "x-forwarded-for") == 0);
    CHECK(count_headers(out, "via") == 0);
    CHECK(count_headers(out, "x-forwarded-proto") == 0);
  }

  TEST_CASE("a Connection-listed Via is replaced by ours, not joined") {
    const Config c = make_config();
    RequestRewrite rw = bare_rewrite(c, InnerHops::pass);
    rw.via = "1.1 onelayer";
    Headers out = rewrite({{"Connection", "via"}, {"Via", "1.0 hidden"}}, rw);
    CHECK(serialize(out) == "Via: 1.1 onelayer\r\n");
  }
}

TEST_SUITE("rewrite_request_headers: inner_hops") {
  Headers with_all_directives() {
    Headers in{{"Host", "inv"}};
    for (const auto& d : kForeignDirectives) in.push_back({d, "5xx"});
    in.push_back({"X-App", "1"});
    return in;
  }

  TEST_CASE("forbid + claim writes exactly the protocol set and strips every foreign directive") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    rw.attempt = 2;
    rw.time_left_ms = 480;
    Headers out = rewrite(with_all_directives(), rw);
    CHECK(serialize(out) ==
          "Host: inv\r\nX-App: 1\r\nbaggage: retry-owner=orders\r\nx-retry-owner: orders\r\nx-retry-attempt: 2\r\n"
          "x-envoy-max-retries: 0\r\nx-request-timeout-ms: 480\r\n");
  }

  TEST_CASE("forbid + claim replaces incoming owner and attempt instead of duplicating them") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    rw.attempt = 3;
    Headers in{{"X-Retry-Owner", "spoof"}, {"X-Retry-Attempt", "9"}, {"x-envoy-max-retries", "10"}};
    Headers out = rewrite(in, rw);
    CHECK(count_headers(out, "x-retry-owner") == 1);
    CHECK(value_of(out, "x-retry-owner") == "orders");
    CHECK(count_headers(out, "x-retry-attempt") == 1);
    CHECK(value_of(out, "x-retry-attempt") == "3");
    CHECK(count_headers(out, "x-envoy-max-retries") == 1);
    CHECK(value_of(out, "x-envoy-max-retries") == "0");
  }

  TEST_CASE("forbid + claim merges into existing baggage, preserving members and joining several fields") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    Headers in{{"Baggage", "userId=alice;p=1"}, {"X-App", "1"}, {"baggage", "tenant=42"}};
    Headers out = rewrite(in, rw);
    CHECK(count_headers(out, "baggage") == 1);
    CHECK(out[0].name == "Baggage");
    CHECK(out[0].value == "userId=alice;p=1,tenant=42,retry-owner=orders");
  }

  TEST_CASE("forbid + claim replaces a stale baggage owner instead of adding a second member") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    Headers out = rewrite({{"baggage", "retry-owner=old,a=1"}}, rw);
    CHECK(value_of(out, "baggage") == "retry-owner=orders,a=1");
  }

  TEST_CASE("forbid + claim with a layer_id needing encoding: raw in the header, encoded in baggage") {
    const Config c = make_config("orders svc");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    Headers out = rewrite({}, rw);
    CHECK(value_of(out, "x-retry-owner") == "orders svc");
    CHECK(value_of(out, "baggage") == "retry-owner=orders%20svc");
    CHECK(detect_outer_owner({{"baggage", value_of(out, "baggage")}}, c.headers).owner == "orders svc");
  }

  TEST_CASE("forbid + claim with an unusable layer_id still claims, as onelayer") {
    const Config c = make_config("bad\r\nInjected: 1");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    Headers out = rewrite({}, rw);
    CHECK(value_of(out, "x-retry-owner") == "onelayer");
    CHECK(serialize(out).find("Injected") == std::string::npos);
  }

  TEST_CASE("forbid + claim leaves baggage as it was when the merge would pass 8192 bytes") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    const std::string big1 = "a=" + std::string(5000, 'x');
    const std::string big2 = "b=" + std::string(3180, 'y');
    Headers out = rewrite({{"baggage", big1}, {"baggage", big2}}, rw);
    REQUIRE(count_headers(out, "baggage") == 2);
    CHECK(out[0].value == big1);
    CHECK(out[1].value == big2);
    CHECK(value_of(out, "x-retry-owner") == "orders");  // the header form still carries ownership
  }

  TEST_CASE("forbid + claim without propagate_baggage neither adds nor touches baggage") {
    const Config c = make_config("orders", false);
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    CHECK(count_headers(rewrite({}, rw), "baggage") == 0);
    CHECK(value_of(rewrite({{"baggage", "a=1"}}, rw), "baggage") == "a=1");
  }

  TEST_CASE("forbid, outer-owned: owner, attempt and baggage pass unchanged, directives stripped") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    Headers in = with_all_directives();
    in.push_back({"x-retry-owner", "edge"});
    in.push_back({"x-retry-attempt", "2"});
    in.push_back({"baggage", " retry-owner = edge ;p"});
    Headers out = rewrite(in, rw);
    CHECK(serialize(out) ==
          "Host: inv\r\nX-App: 1\r\nx-retry-owner: edge\r\nx-retry-attempt: 2\r\nbaggage:  retry-owner = edge ;p\r\n");
  }

  TEST_CASE("forbid, outer_owned flag: x-envoy-max-retries 0 replaces the stripped incoming one") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.outer_owned = true;
    Headers out = rewrite({{"x-retry-owner", "edge"}, {"x-envoy-max-retries", "10"}}, rw);
    CHECK(serialize(out) == "x-retry-owner: edge\r\nx-envoy-max-retries: 0\r\n");
  }

  TEST_CASE("forbid on a route that does not retry writes no protocol headers") {
    const Config c = make_config("orders");
    Headers out = rewrite(with_all_directives(), bare_rewrite(c, InnerHops::forbid));
    CHECK(serialize(out) == "Host: inv\r\nX-App: 1\r\n");
  }

  TEST_CASE("strip removes foreign directives but never claims, even if asked") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::strip);
    rw.claim_ownership = true;
    rw.outer_owned = true;
    Headers in = with_all_directives();
    in.push_back({"x-retry-owner", "edge"});
    in.push_back({"baggage", "a=1"});
    Headers out = rewrite(in, rw);
    CHECK(serialize(out) == "Host: inv\r\nX-App: 1\r\nx-retry-owner: edge\r\nbaggage: a=1\r\n");
  }

  TEST_CASE("pass forwards foreign directives and protocol headers untouched") {
    const Config c = make_config("orders");
    RequestRewrite rw = bare_rewrite(c, InnerHops::pass);
    rw.claim_ownership = true;
    Headers in = with_all_directives();
    in.push_back({"x-retry-owner", "edge"});
    in.push_back({"baggage", "a=1"});
    Headers out = rewrite(in, rw);
    CHECK(out == in);
  }

  TEST_CASE("each foreign directive is stripped in any case under forbid and strip, kept under pass") {
    const Config c = make_config();
    for (const auto& d : kForeignDirectives) {
      std::string upper = d;
      for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      CAPTURE(d);
      Headers in{{upper, "1"}};
      CHECK(rewrite(in, bare_rewrite(c, InnerHops::forbid)).empty());
      CHECK(rewrite(in, bare_rewrite(c, InnerHops::strip)).empty());
      CHECK(rewrite(in, bare_rewrite(c, InnerHops::pass)).size() == 1);
    }
  }

  TEST_CASE("x-request-timeout-ms is replaced in every mode when time_left_ms >= 0, else passes") {
    const Config c = make_config();
    for (InnerHops mode : {InnerHops::forbid, InnerHops::strip, InnerHops::pass}) {
      RequestRewrite rw = bare_rewrite(c, mode);
      Headers in{{"X-Request-Timeout-Ms", "9000"}};
      rw.time_left_ms = 0;
      Headers out = rewrite(in, rw);
      CHECK(count_headers(out, "x-request-timeout-ms") == 1);
      CHECK(value_of(out, "x-request-timeout-ms") == "0");
      rw.time_left_ms = -1;
      CHECK(rewrite(in, rw) == in);
    }
  }

  TEST_CASE("custom header names are written instead of the defaults") {
    Config c = make_config("orders");
    c.headers.retry_owner = "x-owner";
    c.headers.retry_attempt = "x-attempt";
    c.headers.request_timeout_ms = "x-deadline";
    c.headers.baggage_member = "owner";
    RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
    rw.claim_ownership = true;
    rw.time_left_ms = 10;
    Headers out = rewrite({}, rw);
    CHECK(serialize(out) ==
          "baggage: owner=orders\r\nx-owner: orders\r\nx-attempt: 1\r\nx-envoy-max-retries: 0\r\nx-deadline: 10\r\n");
  }

  TEST_CASE("an owner written by one layer is seen as outer owner by the next, through baggage only") {
    const Config outer = make_config("edge");
    RequestRewrite rw = bare_rewrite(outer, InnerHops::forbid);
    rw.claim_ownership = true;
    Headers sent = rewrite({{"baggage", "userId=alice"}}, rw);
    // An app that propagates only baggage into its own outbound call:
    Headers app_call{{"Host", "next"}, {"baggage", value_of(sent, "baggage")}};
    RetryOwnership own = detect_outer_owner(app_call, outer.headers);
    CHECK(own.outer_owned);
    CHECK(own.owner == "edge");
    const Config inner = make_config("orders");
    RequestRewrite inner_rw = bare_rewrite(inner, InnerHops::forbid);
    inner_rw.outer_owned = own.outer_owned;
    Headers forwarded = rewrite(app_call, inner_rw);
    CHECK(value_of(forwarded, "baggage") == "userId=alice,retry-owner=edge");
    CHECK(count_headers(forwarded, "x-retry-owner") == 0);
  }
}

TEST_SUITE("rewrite_response_headers") {
  TEST_CASE("hop-by-hop, Connection-listed and framing fields are dropped, Via appended") {
    Headers in{{"Content-Type", "text/plain"},
               {"Connection", "close, X-Internal"},
               {"X-Internal", "1"},
               {"Keep-Alive", "timeout=5"},
               {"Transfer-Encoding", "chunked"},
               {"Content-Length", "10"},
               {"Upgrade", "h2c"},
               {"Via", "1.1 origin"},
               {"Set-Cookie", "a=1"},
               {"Set-Cookie", "b=2"}};
    Headers out;
    rewrite_response_headers(in, "1.1 onelayer", out);
    CHECK(serialize(out) ==
          "Content-Type: text/plain\r\nVia: 1.1 origin, 1.1 onelayer\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n");
  }

  TEST_CASE("values with CR or LF and invalid names are dropped") {
    Headers in{{"X-Split", "a\r\nSet-Cookie: evil"}, {"X-Lf", "a\nb"}, {"Bad Name", "1"}, {"X-Ok", "1"}};
    Headers out{Header{"stale", "x"}};
    rewrite_response_headers(in, "", out);
    CHECK(serialize(out) == "X-Ok: 1\r\n");
  }

  TEST_CASE("Via is added when the upstream sent none") {
    Headers out;
    rewrite_response_headers({{"Server", "x"}}, "1.1 onelayer", out);
    CHECK(serialize(out) == "Server: x\r\nVia: 1.1 onelayer\r\n");
  }

  TEST_CASE("x-retry-exhausted passes through and marks the response") {
    HeaderNames names;
    Headers in{{"X-Retry-Exhausted", "3"}};
    Headers out;
    rewrite_response_headers(in, "", out);
    CHECK(response_marks_exhausted(out, names));
    CHECK_FALSE(response_marks_exhausted({{"Server", "x"}}, names));
    names.retry_exhausted = "x-gave-up";
    CHECK_FALSE(response_marks_exhausted(in, names));
    CHECK(response_marks_exhausted({{"X-Gave-Up", "2"}}, names));
  }
}

TEST_SUITE("append_serialized") {
  TEST_CASE("writes Name: value CRLF per field and appends to existing text") {
    std::string s = "HTTP/1.1 200 OK\r\n";
    append_serialized({{"A", "1"}, {"b", ""}}, s);
    CHECK(s == "HTTP/1.1 200 OK\r\nA: 1\r\nb: \r\n");
  }
}

namespace {

// Upstream response heads the two ways of rewriting are compared on.
std::vector<Headers> response_rewrite_inputs() {
  return {
      {},
      {{"Content-Type", "text/plain"}, {"Content-Length", "3"}},
      {{"Via", "1.0 a"}, {"Server", "x"}, {"via", "1.1 b"}, {"Via", ""}},
      {{"Connection", "close, X-Secret"}, {"X-Secret", "s"}, {"Keep-Alive", "timeout=5"}, {"ETag", "\"1\""}},
      {{"Transfer-Encoding", "chunked"}, {"Trailer", "x"}, {"Upgrade", "h2c"}, {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}},
      {{"Bad Name", "v"}, {"X-Ok", "v"}, {"X-Ctl", std::string("a\x01b")}, {"Via", "1.1 c"}},
      {{"x-retry-exhausted", "3"}, {"Proxy-Connection", "keep-alive"}, {"TE", "trailers"}},
  };
}

// Copies what a rewrite puts, in order.
class CollectingSink final : public HeaderSink {
 public:
  void put(std::string_view name, std::string_view value) override {
    fields.push_back(Header{std::string(name), std::string(value)});
  }
  Headers fields;
};

}  // namespace

TEST_CASE("a response rewrite into a sink puts the fields the list gets, in order") {
  for (std::string_view via : {std::string_view("1.1 onelayer"), std::string_view("")}) {
    for (const Headers& in : response_rewrite_inputs()) {
      Headers listed;
      rewrite_response_headers(in, via, listed);
      CollectingSink sink;
      rewrite_response_headers(in, via, sink);
      CHECK(sink.fields == listed);
    }
  }
  // Via merged into the first one, the rest kept as sent.
  CollectingSink sink;
  rewrite_response_headers({{"Via", "1.0 a"}, {"Server", "x"}, {"via", "1.1 b"}}, "2 onelayer", sink);
  CHECK(sink.fields == Headers{{"Via", "1.0 a, 1.1 b, 2 onelayer"}, {"Server", "x"}});
}

TEST_CASE("a request rewrite into a sink with a host slot: Host fields out of the sink, the first non-empty one kept") {
  const Config c = make_config("orders", true);
  const std::vector<Headers> inputs = {
      {},
      {{"Accept", "*/*"}},
      {{"Host", "svc:8080"}, {"Accept", "*/*"}},
      {{"Accept", "*/*"}, {"host", "a"}, {"Via", "1.0 edge"}},
      {{"Host", ""}, {"HOST", "b"}, {"Host", "c"}},
      {{"Connection", "Host"}, {"Host", "a"}, {"X-Ok", "v"}},
  };
  for (bool claim : {true, false}) {
    for (const Headers& in : inputs) {
      RequestRewrite rw{&c};
      rw.claim_ownership = claim;
      rw.time_left_ms = 750;
      rw.client_ip = "127.0.0.1";
      Headers listed;
      rewrite_request_headers(in, rw, listed);
      Headers expected;
      std::string_view expected_host;
      for (const Header& f : listed) {
        if (!iequals(f.name, "host")) {
          expected.push_back(f);
        } else if (expected_host.empty()) {
          expected_host = f.value;
        }
      }
      CollectingSink sink;
      std::string_view host = "unchanged";
      if (find_header(in, "host") != nullptr) host = {};
      rewrite_request_headers(in, rw, sink, host);
      CHECK(sink.fields == expected);
      if (find_header(in, "host") == nullptr) {
        CHECK(host == "unchanged");  // no Host: left as it was
      } else {
        CHECK(host == expected_host);
      }
    }
  }
  // The view is into the received field.
  const Headers in{{"Host", "api.example:81"}};
  CollectingSink sink;
  std::string_view host;
  rewrite_request_headers(in, RequestRewrite{&c}, sink, host);
  CHECK(host.data() == in[0].value.data());
}

TEST_CASE("DirectResponseSerializationMatchesRewriteThenSerialize") {
  for (std::string_view via : {std::string_view("1.1 onelayer"), std::string_view("")}) {
    for (const Headers& in : response_rewrite_inputs()) {
      Headers rewritten;
      rewrite_response_headers(in, via, rewritten);
      std::string expected, direct;
      append_serialized(rewritten, expected);
      append_rewritten_response_headers(in, via, direct);
      CHECK(direct == expected);
    }
  }
}

TEST_CASE("DirectRequestSerializationMatchesRewriteThenSerialize") {
  const std::vector<Headers> inputs = {
      {},
      {{"Host", "svc:8080"}, {"Accept", "*/*"}},
      {{"host", "a"}, {"Via", "1.0 edge"}, {"X-Forwarded-For", "10.0.0.1"}, {"via", "1.1 gw"}, {"X-Forwarded-Proto", "https"}},
      {{"Host", "a"}, {"Connection", "keep-alive, X-Secret, x-retry-owner"}, {"X-Secret", "s"}, {"x-retry-owner", "edge"}},
      {{"Host", "a"}, {"baggage", "k=v"}, {"Baggage", "onelayer-retry-owner=edge"}, {"x-envoy-retry-on", "5xx"},
       {"l5d-retry-limit", "3"}, {"x-request-timeout-ms", "900"}, {"x-retry-attempt", "2"}},
      {{"Host", "a"}, {"Content-Length", "3"}, {"Transfer-Encoding", "chunked"}, {"TE", "trailers"}, {"Upgrade", "h2c"}},
      {{"Bad Name", "v"}, {"X-Ok", "v"}, {"X-Ctl", std::string("a\x01b")}, {"baggage", std::string(9000, 'x')}},
  };
  const Config c = make_config("orders", true);
  for (InnerHops mode : {InnerHops::forbid, InnerHops::strip, InnerHops::pass}) {
    for (bool claim : {true, false}) {
      for (const Headers& in : inputs) {
        RequestRewrite rw{&c};
        rw.inner_hops = mode;
        rw.claim_ownership = claim;
        rw.outer_owned = !claim;
        rw.attempt = 2;
        rw.time_left_ms = claim ? 750 : -1;
        rw.client_ip = "127.0.0.1";
        Headers rewritten;
        rewrite_request_headers(in, rw, rewritten);
        std::string direct = "GET / HTTP/1.1\r\n";
        bool host = append_rewritten_request_headers(in, rw, direct);
        CHECK(direct == "GET / HTTP/1.1\r\n" + serialize(rewritten));
        CHECK(host == (find_header(rewritten, "host") != nullptr));
      }
    }
  }
}

TEST_CASE("DirectRequestSerializationWritesMergedListsAndProtocolFieldsInOrder") {
  const Config c = make_config("orders", false);
  RequestRewrite rw{&c};
  rw.inner_hops = InnerHops::forbid;
  rw.claim_ownership = true;
  rw.attempt = 3;
  rw.time_left_ms = 250;
  rw.client_ip = "10.1.2.3";
  std::string out;
  bool host = append_rewritten_request_headers(
      {{"Host", "svc"}, {"Via", "1.0 edge"}, {"X-Envoy-Max-Retries", "5"}, {"via", "1.1 gw"}}, rw, out);
  CHECK(host);
  CHECK(out ==
        "Host: svc\r\nVia: 1.0 edge, 1.1 gw, 1.1 onelayer\r\nx-retry-owner: orders\r\nx-retry-attempt: 3\r\n"
        "x-envoy-max-retries: 0\r\nx-request-timeout-ms: 250\r\nX-Forwarded-For: 10.1.2.3\r\n"
        "X-Forwarded-Proto: http\r\n");
}

TEST_CASE("DirectResponseSerializationCountsDroppedInvalidFields") {
  std::string out;
  CHECK(append_rewritten_response_headers({{"Bad Name", "v"}, {"X-Ok", "v"}, {"X-Ctl", std::string("a\x01b")}},
                                          "1.1 onelayer", out) == 2);
  CHECK(out == "X-Ok: v\r\nVia: 1.1 onelayer\r\n");
  out.clear();
  CHECK(append_rewritten_response_headers({{"Connection", "X-Gone"}, {"X-Gone", "bad\rvalue"}}, "", out) == 0);
  CHECK(out.empty());
}

TEST_CASE("FieldValueCheckAgreesWithTheByteRuleForEveryByteAtEveryOffset") {
  // is_valid_field_value checks eight bytes at a time: every byte value, at
  // every offset of strings long enough to take whole words and a tail.
  auto reference = [](std::string_view v) {
    for (unsigned char c : v)
      if ((c < 0x20 && c != '\t') || c == 0x7F) return false;
    return true;
  };
  for (size_t len : {1u, 7u, 8u, 9u, 16u, 23u}) {
    for (size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        for (char filler : {'a', '\t', '\x80', '~'}) {
          std::string v(len, filler);
          v[at] = static_cast<char>(b);
          REQUIRE_MESSAGE(is_valid_field_value(v) == reference(v), "byte " << b << " at " << at << " of " << len);
        }
      }
    }
  }
}

TEST_CASE("HopByHopNamesIncludeTransferEncodingAndConnectionListedOnes") {
  const Headers all = {{"Connection", "X-Listed"}};
  CHECK(is_hop_by_hop("Transfer-Encoding", all));
  CHECK(is_hop_by_hop("keep-alive", all));
  CHECK(is_hop_by_hop("x-listed", all));
  CHECK_FALSE(is_hop_by_hop("Content-Length", all));
  CHECK_FALSE(is_hop_by_hop("X-Other", all));
}

TEST_CASE("EveryForeignRetryDirectiveIsStrippedWhateverItsCase") {
  // The rewrite finds names through a table indexed by length: each listed
  // name, in any case, must still be found.
  const Config c = make_config();
  for (const std::string& name : kForeignDirectives) {
    std::string upper(name);
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    Headers out = rewrite({{"Host", "a"}, {name, "1"}, {upper, "2"}}, bare_rewrite(c, InnerHops::strip));
    const Headers expected = {{"Host", "a"}};
    CHECK_MESSAGE(out == expected, name);
  }
}

TEST_CASE("TrailersLoseHopByHopFramingHostAndInvalidFieldsAndKeepTheRestInOrder") {
  const Headers in = {{"grpc-status", "0"},        {"Transfer-Encoding", "chunked"}, {"Content-Length", "5"},
                      {"Trailer", "x-sum"},        {"Connection", "close"},          {"TE", "trailers"},
                      {"Host", "evil.example"},    {"Bad Name", "1"},                {"x-bad", "a\r\nb"},
                      {"X-Checksum", "abc123"},    {"grpc-message", "fine"}};
  Headers out{{"stale", "x"}};
  rewrite_trailers(in, out);
  const Headers expected = {{"grpc-status", "0"}, {"X-Checksum", "abc123"}, {"grpc-message", "fine"}};
  CHECK(out == expected);
}

TEST_CASE("ViaNamesTheProtocolVersionTheMessageArrivedWith") {
  CHECK(via_member_for(2, 0) == "2 onelayer");
  CHECK(via_member_for(1, 1) == "1.1 onelayer");
  CHECK(via_member_for(1, 0) == "1.0 onelayer");
}

TEST_CASE("copy_lowercase, the eight-byte steps: every byte at every position of the eight-byte steps, in place too") {
  // Each byte value at each position of strings of 1 to 24 bytes (shorter
  // than a step, whole steps, steps and a tail), against the byte-by-byte
  // rule.
  for (size_t len = 1; len <= 24; ++len)
  for (int b = 0; b < 256; ++b) {
    for (size_t pos = 0; pos < len; ++pos) {
      std::string in(len, 'Q');
      in[pos] = static_cast<char>(b);
      std::string expect = in;
      for (char& c : expect)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      std::string out(in.size(), '\0');
      copy_lowercase(in, out.data());
      REQUIRE_MESSAGE(out == expect, "byte " << b << " at " << pos);
      copy_lowercase(in, in.data());
      REQUIRE(in == expect);
    }
  }
  std::string empty;
  copy_lowercase(empty, empty.data());
  CHECK(empty.empty());
}

TEST_CASE("is_token, the four-byte steps: every byte at every position of 1 to 12 bytes, against the tchar list") {
  // RFC 9110 5.6.2, spelled out here rather than taken from the code.
  const std::string tchar = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (size_t len = 1; len <= 12; ++len) {
    for (int b = 0; b < 256; ++b) {
      for (size_t pos = 0; pos < len; ++pos) {
        std::string s(len, 'a');
        s[pos] = static_cast<char>(b);
        const bool expect = tchar.find(static_cast<char>(b)) != std::string::npos;
        REQUIRE_MESSAGE(is_token(s) == expect, "byte " << b << " at " << pos << " of " << len);
      }
    }
  }
}

TEST_CASE("has_ascii_upper, the eight-byte steps: every byte at every position of 1 to 24 bytes") {
  for (size_t len = 1; len <= 24; ++len) {
    for (int b = 0; b < 256; ++b) {
      for (size_t pos = 0; pos < len; ++pos) {
        std::string s(len, 'q');
        s[pos] = static_cast<char>(b);
        REQUIRE_MESSAGE(has_ascii_upper(s) == (b >= 'A' && b <= 'Z'), "byte " << b << " at " << pos << " of " << len);
      }
    }
  }
  CHECK_FALSE(has_ascii_upper(""));
}

TEST_CASE("iequals, the eight-byte steps: every byte pair at every position of 1 to 24 bytes, against the byte rule") {
  auto lower = [](unsigned char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; };
  for (size_t len = 1; len <= 24; ++len) {
    for (size_t pos = 0; pos < len; ++pos) {
      for (int a = 0; a < 256; ++a) {
        // The same byte, its other case, a neighbour and a byte 0x20 away
        // (which only a letter may be).
        for (int b : {a, a ^ 0x20, (a + 1) & 0xFF}) {
          std::string x(len, 'k'), y(len, 'K');
          x[pos] = static_cast<char>(a);
          y[pos] = static_cast<char>(b);
          const bool expect = lower(static_cast<unsigned char>(a)) == lower(static_cast<unsigned char>(b));
          REQUIRE_MESSAGE(iequals(x, y) == expect, "bytes " << a << " and " << b << " at " << pos << " of " << len);
          REQUIRE(iequals(y, x) == expect);
        }
      }
    }
  }
  CHECK_FALSE(iequals("abc", "abcd"));
  CHECK_FALSE(iequals("", "a"));
}

TEST_CASE("field value check for 2 to 17 bytes: every byte at every offset, against the byte rule") {
  // Fewer than 4 bytes are checked byte by byte, 4 to 7 as one word made
  // of two overlapping halves, 8 to 16 as two overlapping words.
  auto reference = [](std::string_view v) {
    for (unsigned char c : v)
      if ((c < 0x20 && c != '\t') || c == 0x7F) return false;
    return true;
  };
  for (size_t len = 2; len <= 17; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        for (char filler : {'a', '\t', '\x80'}) {
          std::string v(len, filler);
          v[at] = static_cast<char>(b);
          REQUIRE_MESSAGE(is_valid_field_value(v) == reference(v), "byte " << b << " at " << at << " of " << len);
        }
      }
    }
  }
}

TEST_CASE("the rewrite knows its fields by name in any case, and not by a name that only shares a first byte") {
  Config c = make_config();
  RequestRewrite rw = bare_rewrite(c, InnerHops::forbid);
  // Same length and first letter as hop-by-hop or foreign names, or a first
  // byte that is a letter only after ORing 0x20 onto a non-letter.
  const Headers in{{"CONNECTIOM", "1"}, {"Kee-alive-", "2"}, {"~e", "3"}, {"^IA", "4"},
                   {"L5D-RETRY-HTTP", "5"}, {"L5d-Retry-Grpx", "6"}, {"tE", "7"}, {"VIA", "8"}};
  Headers out = rewrite(in, rw);
  // tE is TE (hop-by-hop) and L5D-RETRY-HTTP a foreign directive: dropped.
  // VIA is Via (passed on: this rewrite appends no member).
  CHECK(out == Headers{{"CONNECTIOM", "1"}, {"Kee-alive-", "2"}, {"~e", "3"}, {"^IA", "4"}, {"L5d-Retry-Grpx", "6"},
                       {"VIA", "8"}});
}

TEST_CASE("ClaimingWithoutReceivedBaggageWritesTheOwnerAndAttemptMembersWhateverTheOwnerLength") {
  // Short owners are built on the stack, long ones merged: the bytes are
  // the same, and the attempt member follows whenever it fits.
  for (size_t len : {1u, 202u, 203u, 300u, 8138u, 8139u, 8180u, 8181u}) {
    CAPTURE(len);
    const std::string layer(len, 'o');
    const Config c = make_config(layer);
    const RequestRewrite rw = claiming_rewrite(c, 3, 0xAB);
    Headers out = rewrite({{"Host", "h"}, {"baggage", ""}}, rw);
    const std::string owner_member = "retry-owner=" + layer;
    if (owner_member.size() > kMaxBaggageBytes) {
      CHECK(value_of(out, "baggage") == "");  // the received (empty) field as it was
    } else if (owner_member.size() + 42 > kMaxBaggageBytes) {
      CHECK(value_of(out, "baggage") == owner_member);  // the owner member alone still goes
    } else {
      CHECK(value_of(out, "baggage") == owner_member + ",retry-attempt=00000000000000ab.3");
    }
    CHECK(count_headers(out, "baggage") == 1);
    CHECK(out[1].name == "baggage");  // where the received field was
  }
}

TEST_CASE("ClaimingWithAnOwnerThatNamesTheAttemptMemberStillWritesBothMembersOnce") {
  const Config c = make_config("retry-attempt");
  RequestRewrite rw = claiming_rewrite(c, 2, 0x1234);
  Headers out = rewrite({}, rw);
  CHECK(value_of(out, "baggage") == "retry-owner=retry-attempt,retry-attempt=0000000000001234.2");
  rw.attempt_id = 0;
  CHECK(value_of(rewrite({}, rw), "baggage") == "retry-owner=retry-attempt");
}

TEST_CASE("the baggage owner member follows the config from one rewrite to the next") {
  // The owner member is worked out once per key and owner on a thread: a
  // config with another owner or key, even at the same address and of the
  // same length, gets its own.
  struct Case {
    std::string layer, key, baggage;
  };
  const std::vector<Case> cases = {
      {"orders", "retry-owner", "retry-owner=orders,retry-attempt=0000000000000005.2"},
      {"ordesr", "retry-owner", "retry-owner=ordesr,retry-attempt=0000000000000005.2"},
      {"orders", "owner-of-it", "owner-of-it=orders,retry-attempt=0000000000000005.2"},
      {"a b;c", "retry-owner", "retry-owner=a%20b%3Bc,retry-attempt=0000000000000005.2"},
      {"orders", "bad key", "<absent>"},
      {"retry-attempt", "retry-owner", "retry-owner=retry-attempt,retry-attempt=0000000000000005.2"},
      {"orders", "retry-owner", "retry-owner=orders,retry-attempt=0000000000000005.2"},
  };
  for (int round = 0; round < 2; ++round) {
    for (const Case& k : cases) {
      CAPTURE(k.layer);
      CAPTURE(k.key);
      Config c = make_config(k.layer);
      c.headers.baggage_member = k.key;
      CHECK(value_of(rewrite({}, claiming_rewrite(c, 2, 5)), "baggage") == k.baggage);
    }
  }
}

TEST_CASE("ClaimingWithABaggageMemberKeyThatIsNoTokenWritesNoBaggage") {
  Config c = make_config("orders");
  c.headers.baggage_member = "bad key";
  const RequestRewrite rw = claiming_rewrite(c, 1, 7);
  CHECK(value_of(rewrite({}, rw), "baggage") == "<absent>");
  CHECK(value_of(rewrite({{"baggage", "a=1"}}, rw), "baggage") == "a=1");
  CHECK(value_of(rewrite({}, rw), "x-retry-owner") == "orders");
}

TEST_CASE("ClaimingMergesIntoOneReceivedBaggageFieldOrSeveralJoined") {
  const Config c = make_config("orders");
  const RequestRewrite rw = claiming_rewrite(c, 1, 0xF);
  const std::string attempt = "retry-attempt=000000000000000f.1";
  CHECK(value_of(rewrite({{"baggage", "a=1"}}, rw), "baggage") == "a=1,retry-owner=orders," + attempt);
  // An empty first field adds no comma when joined (as before the merge).
  Headers out = rewrite({{"baggage", ""}, {"Baggage", "b=2"}, {"x", "y"}, {"baggage", "retry-owner=old"}}, rw);
  CHECK(out == Headers{{"baggage", "b=2,retry-owner=orders," + attempt}, {"x", "y"}, {"x-retry-owner", "orders"},
                       {"x-retry-attempt", "1"}, {"x-envoy-max-retries", "0"}});
}
