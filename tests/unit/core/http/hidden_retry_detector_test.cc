#include <doctest/doctest.h>

#include <string>

#include "core/config/config.h"
#include "core/http/hidden_retry_detector.h"
#include "core/http/http_headers.h"

using namespace onelayer;
using namespace std::chrono_literals;
using Key = HiddenRetryDetector::AttemptKey;

namespace {
const TimePoint kT0 = TimePoint{} + 1000s;

HiddenRetryDetector::Signals sig(uint64_t id, uint32_t attempt) {
  HiddenRetryDetector::Signals s;
  s.key = Key{id, attempt};
  return s;
}
}  // namespace

TEST_CASE("hidden: member values parse and format") {
  std::string v;
  HiddenRetryDetector::append_member_value(0xabcdef0123456789ULL, 2, v);
  CHECK(v == "abcdef0123456789.2");
  CHECK(HiddenRetryDetector::parse_member(v) == Key{0xabcdef0123456789ULL, 2});
  CHECK(HiddenRetryDetector::parse_member("1f.10") == Key{0x1f, 10});
  CHECK_FALSE(HiddenRetryDetector::parse_member("1f"));
  CHECK_FALSE(HiddenRetryDetector::parse_member(".1"));
  CHECK_FALSE(HiddenRetryDetector::parse_member("1f.0"));
  CHECK_FALSE(HiddenRetryDetector::parse_member("1f.01"));
  CHECK_FALSE(HiddenRetryDetector::parse_member("xyz.1"));
  CHECK_FALSE(HiddenRetryDetector::parse_member("11112222333344445.1"));  // 17 hex digits
}

TEST_CASE("hidden: signals come from baggage and x-envoy-attempt-count") {
  Headers h{{"Baggage", "retry-owner=a, retry-attempt=00000000000000ff.3"}, {"x-envoy-attempt-count", "2"}};
  HiddenRetryDetector::Signals s = HiddenRetryDetector::read_signals(h);
  REQUIRE(s.key);
  CHECK(*s.key == Key{0xff, 3});
  CHECK(s.envoy_attempt_count == 2);
  Headers split{{"baggage", "retry-owner=a"}, {"baggage", "retry-attempt=7.1"}};
  CHECK(HiddenRetryDetector::read_signals(split).key == Key{7, 1});
  CHECK_FALSE(HiddenRetryDetector::read_signals(Headers{{"x-envoy-attempt-count", "x"}}).key);
  // Properties are ignored; a percent-encoded value is decoded; the first member counts.
  CHECK(HiddenRetryDetector::read_signals(Headers{{"baggage", "retry-attempt = 00ff.1;p=q"}}).key == Key{0xff, 1});
  CHECK(HiddenRetryDetector::read_signals(Headers{{"baggage", "retry-attempt=%30f.2"}}).key == Key{0x0f, 2});
  CHECK(HiddenRetryDetector::read_signals(Headers{{"baggage", "retry-attempt=a.1,retry-attempt=b.1"}}).key ==
        Key{0xa, 1});
  CHECK(HiddenRetryDetector::read_signals(Headers{{"baggage", "x-retry-attempt=a.1"}}).key == std::nullopt);
}

TEST_CASE("hidden: the same pair twice is one hidden retry, a new attempt is not") {
  HiddenRetryDetector d;
  CHECK_FALSE(d.observe("r", "outer", sig(1, 1), kT0).hidden_retry);
  HiddenRetryDetector::Verdict v = d.observe("r", "outer", sig(1, 1), kT0 + 1s);
  CHECK(v.hidden_retry);
  CHECK(v.warn);  // the first for this owner
  CHECK(v.owner == "outer");
  CHECK_FALSE(d.observe("r", "outer", sig(1, 2), kT0 + 1s).hidden_retry);  // the owner's own retry
  CHECK(d.observe("r", "outer", sig(1, 1), kT0 + 2s).hidden_retry);       // a third send
  auto series = d.series();
  REQUIRE(series.size() == 1);
  CHECK(series[0].route == "r");
  CHECK(series[0].owner == "outer");
  CHECK(series[0].count == 2);
}

TEST_CASE("hidden: pairs are forgotten after 60 s, warnings come once a minute per owner") {
  HiddenRetryDetector d;
  CHECK_FALSE(d.observe("r", "o", sig(5, 1), kT0).hidden_retry);
  CHECK_FALSE(d.observe("r", "o", sig(5, 1), kT0 + 60s).hidden_retry);  // remembered again from here
  CHECK(d.observe("r", "o", sig(5, 1), kT0 + 61s).warn);
  CHECK(d.observe("r", "o", sig(5, 1), kT0 + 62s).hidden_retry);
  CHECK_FALSE(d.observe("r", "o", sig(5, 1), kT0 + 62s).warn);
  CHECK_FALSE(d.observe("r", "o", sig(6, 1), kT0 + 100s).hidden_retry);
  HiddenRetryDetector::Verdict v = d.observe("r", "o", sig(6, 1), kT0 + 110s);
  CHECK(v.hidden_retry);
  CHECK_FALSE(v.warn);  // 49 s after the last warning
  CHECK(d.observe("r", "o", sig(6, 1), kT0 + 122s).warn);  // 61 s after it
}

TEST_CASE("hidden: Envoy's attempt count above 1 counts, owner labels are sanitized") {
  HiddenRetryDetector d;
  HiddenRetryDetector::Signals s;
  s.envoy_attempt_count = 1;
  CHECK_FALSE(d.observe("r", "o", s, kT0).hidden_retry);
  s.envoy_attempt_count = 2;
  HiddenRetryDetector::Verdict v = d.observe("r", "bad\"owner\n", s, kT0);
  CHECK(v.hidden_retry);
  CHECK(v.owner == "bad_owner_");
}

TEST_CASE("hidden: memory stays bounded under many distinct ids, a recent repeat is still seen") {
  HiddenRetryDetector d;
  for (uint64_t i = 1; i <= 200000; ++i) d.observe("r", "o", sig(i, 1), kT0);
  CHECK(d.series().empty());                                   // nothing counted for first sends
  CHECK(d.observe("r", "o", sig(200000, 1), kT0).hidden_retry);  // the newest pair is remembered
}

TEST_CASE("hidden: the owning layer writes the member next to retry-owner") {
  Config c;
  c.layer_id = "outer";
  RequestRewrite rw;
  rw.config = &c;
  rw.claim_ownership = true;
  rw.attempt = 2;
  rw.attempt_id = 0x1234;
  Headers in{{"Host", "x"}, {"baggage", "k=v"}}, out;
  rewrite_request_headers(in, rw, out);
  const Header* b = find_header(out, "baggage");
  REQUIRE(b);
  CHECK(b->value == "k=v,retry-owner=outer,retry-attempt=0000000000001234.2");
  // A member already there (an outer layer's, passed on) is replaced, not repeated.
  Headers again{{"Host", "x"}, {"baggage", "retry-attempt=00000000000000aa.1,k=v"}};
  rewrite_request_headers(again, rw, out);
  CHECK(find_header(out, "baggage")->value == "retry-attempt=0000000000001234.2,k=v,retry-owner=outer");
  rw.attempt_id = 0;  // not written without an id
  rewrite_request_headers(in, rw, out);
  CHECK(find_header(out, "baggage")->value == "k=v,retry-owner=outer");
}

TEST_CASE("hidden: the member value is 16 hex digits, a dot and the attempt, written or appended alike") {
  for (uint32_t attempt : {1u, 42u, 4294967295u}) {
    char buf[HiddenRetryDetector::kMemberValueBytes + 1];
    buf[HiddenRetryDetector::kMemberValueBytes] = '#';
    char* end = HiddenRetryDetector::write_member_value(0xFEDCBA9876543210ull, attempt, buf);
    const std::string written(buf, end);
    CHECK(written == "fedcba9876543210." + std::to_string(attempt));
    CHECK(buf[HiddenRetryDetector::kMemberValueBytes] == '#');  // the largest fits the room
    std::string appended = "x";
    HiddenRetryDetector::append_member_value(0xFEDCBA9876543210ull, attempt, appended);
    CHECK(appended == "x" + written);
  }
  char buf[HiddenRetryDetector::kMemberValueBytes];
  CHECK(std::string(buf, HiddenRetryDetector::write_member_value(0, 1, buf)) == "0000000000000000.1");
}

TEST_CASE("hidden: grpc-previous-rpc-attempts counts unless it is the owner's own count") {
  const auto signals = HiddenRetryDetector::read_signals({{"grpc-previous-rpc-attempts", "2"}});
  CHECK(signals.grpc_previous_attempts == 2);
  CHECK(HiddenRetryDetector::read_signals({{"grpc-previous-rpc-attempts", "x"}}).grpc_previous_attempts == 0);

  HiddenRetryDetector::Signals s;
  CHECK_FALSE(HiddenRetryDetector::grpc_attempts_reveal_retry(s));  // absent
  s.grpc_previous_attempts = 1;
  CHECK(HiddenRetryDetector::grpc_attempts_reveal_retry(s));  // nobody owns the count
  s.owner_attempt = 2;
  CHECK_FALSE(HiddenRetryDetector::grpc_attempts_reveal_retry(s));  // the owner's retry 2
  s.owner_attempt = 1;
  CHECK(HiddenRetryDetector::grpc_attempts_reveal_retry(s));  // the owner's first attempt, retried by a hop
  HiddenRetryDetector::Signals by_baggage = sig(7, 3);
  by_baggage.grpc_previous_attempts = 2;
  CHECK_FALSE(HiddenRetryDetector::grpc_attempts_reveal_retry(by_baggage));
  by_baggage.grpc_previous_attempts = 1;
  CHECK(HiddenRetryDetector::grpc_attempts_reveal_retry(by_baggage));

  HiddenRetryDetector d;
  HiddenRetryDetector::Signals hop;
  hop.grpc_previous_attempts = 1;
  CHECK(d.observe("r", "outer", hop, kT0).hidden_retry);
  hop.owner_attempt = 2;
  CHECK_FALSE(d.observe("r", "outer", hop, kT0).hidden_retry);
}
