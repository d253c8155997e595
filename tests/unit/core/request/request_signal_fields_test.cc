#include <doctest/doctest.h>

#include <vector>

#include "core/grpc/grpc_protocol.h"
#include "core/request/request_deadline.h"
#include "core/request/request_signal_fields.h"

using namespace onelayer;
using namespace std::chrono_literals;

namespace {

// Each slot must be what find_header() finds: the first of its name.
void check_matches_find_header(const Headers& h, const HeaderNames& names, std::string_view key) {
  const RequestSignalFields f = RequestSignalFields::find(h, names, key);
  CHECK(f.retry_owner == find_header(h, names.retry_owner));
  CHECK(f.baggage == find_header(h, "baggage"));
  CHECK(f.request_timeout == find_header(h, names.request_timeout_ms));
  CHECK(f.grpc_timeout == find_header(h, kGrpcTimeoutField));
  CHECK(f.content_type == find_header(h, "content-type"));
  CHECK(f.idempotency_key == (key.empty() ? nullptr : find_header(h, key)));
}

}  // namespace

TEST_CASE("RequestSignalFieldsFindsTheFirstOfEachNameAsFindHeaderDoes") {
  const HeaderNames names;
  const std::vector<Headers> lists = {
      {},
      {{"host", "a"}, {"user-agent", "h2load"}, {"content-length", "64"}},
      {{"X-Retry-Owner", ""}, {"x-retry-owner", "mesh"}, {"BAGGAGE", "retry-owner=x"}, {"baggage", "k=v"}},
      {{"x-request-timeout-ms", "bad"}, {"X-Request-Timeout-Ms", "20"}, {"grpc-timeout", "1S"},
       {"Grpc-Timeout", "5m"}},
      {{"content-type", "text/plain"}, {"Content-Type", "application/grpc"}, {"idempotency-key", "k1"},
       {"Idempotency-Key", ""}},
  };
  for (const Headers& h : lists) {
    check_matches_find_header(h, names, "idempotency-key");
    check_matches_find_header(h, names, "");
  }
  HeaderNames renamed;
  renamed.retry_owner = "x-owner";
  renamed.request_timeout_ms = "x-deadline";
  check_matches_find_header({{"x-owner", "o"}, {"x-retry-owner", "p"}, {"X-Deadline", "5"}}, renamed, "");
}

// The shortcuts Exchange::start takes when the fields are absent give what
// the full readers give.
TEST_CASE("RequestSignalFieldsAbsentMeansNotOwnedAndTheRouteTimeout") {
  const HeaderNames names;
  const Headers h = {{"host", "a"}, {"content-type", "application/grpc"}, {"x-other", "1"}};
  const RequestSignalFields f = RequestSignalFields::find(h, names, "");
  CHECK_FALSE(f.may_be_outer_owned());
  CHECK_FALSE(detect_outer_owner(h, names).outer_owned);
  CHECK_FALSE(f.may_shorten_timeout());
  CHECK(request_timeout(Millis{1500}, h, names) == Millis{1500});
  CHECK(is_grpc_content_type(f.content_type->value) == is_grpc_request(h));

  const Headers timed = {{"grpc-timeout", "2S"}};
  CHECK(RequestSignalFields::find(timed, names, "").may_shorten_timeout());
  const Headers owned = {{"baggage", "retry-owner=mesh"}};
  CHECK(RequestSignalFields::find(owned, names, "").may_be_outer_owned());
  CHECK(detect_outer_owner(owned, names).outer_owned);
}
