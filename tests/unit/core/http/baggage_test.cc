#include "core/http/baggage.h"

#include <doctest/doctest.h>

#include <string>

using namespace onelayer;

namespace {

// Counts list members whose key (before '=', OWS trimmed) is `key`.
size_t members_with_key(const std::string& header, const std::string& key) {
  size_t n = 0;
  size_t pos = 0;
  while (pos <= header.size()) {
    size_t comma = header.find(',', pos);
    std::string m = header.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::string k = m.substr(0, m.find_first_of("=;"));
    k.erase(0, k.find_first_not_of(" \t"));
    k.erase(k.find_last_not_of(" \t") + 1);
    if (k == key) ++n;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return n;
}

}  // namespace

TEST_SUITE("baggage_get") {
  TEST_CASE("single member returns its value") {
    CHECK(baggage_get("retry-owner=orders", "retry-owner") == std::optional<std::string>("orders"));
  }

  TEST_CASE("member among others is found and others are ignored") {
    CHECK(baggage_get("userId=alice,retry-owner=orders,tenant=42", "retry-owner") == std::optional<std::string>("orders"));
    CHECK(baggage_get("userId=alice,retry-owner=orders,tenant=42", "tenant") == std::optional<std::string>("42"));
  }

  TEST_CASE("properties after the value are not part of it") {
    CHECK(baggage_get("retry-owner=orders;ttl=5;sampled", "retry-owner") == std::optional<std::string>("orders"));
    CHECK(baggage_get("a=1, retry-owner = orders ; prop ; k = v", "retry-owner") == std::optional<std::string>("orders"));
  }

  TEST_CASE("optional whitespace around members, keys and values is ignored") {
    CHECK(baggage_get(" \t retry-owner \t= \torders\t , x=y", "retry-owner") == std::optional<std::string>("orders"));
    CHECK(baggage_get("x=y ,\tretry-owner=orders  ", "retry-owner") == std::optional<std::string>("orders"));
  }

  TEST_CASE("percent-encoded value is decoded") {
    CHECK(baggage_get("retry-owner=orders%20svc%2C%3B%25", "retry-owner") == std::optional<std::string>("orders svc,;%"));
    CHECK(baggage_get("k=caf%C3%A9", "k") == std::optional<std::string>("caf\xC3\xA9"));
    CHECK(baggage_get("k=%e2%82%ac", "k") == std::optional<std::string>("\xE2\x82\xAC"));  // lower-case hex
  }

  TEST_CASE("a percent sign without two hex digits stays literal") {
    CHECK(baggage_get("k=50%", "k") == std::optional<std::string>("50%"));
    CHECK(baggage_get("k=%zz1", "k") == std::optional<std::string>("%zz1"));
    CHECK(baggage_get("k=%4", "k") == std::optional<std::string>("%4"));
  }

  TEST_CASE("decoded invalid UTF-8 is replaced with U+FFFD") {
    CHECK(baggage_get("k=a%FFb", "k") == std::optional<std::string>("a\xEF\xBF\xBD" "b"));
    CHECK(baggage_get("k=%C3", "k") == std::optional<std::string>("\xEF\xBF\xBD"));        // truncated sequence
    CHECK(baggage_get("k=%ED%A0%80", "k") == std::optional<std::string>(                   // surrogate
                                                "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"));
    CHECK(baggage_get("k=%F0%9F%98%80", "k") == std::optional<std::string>("\xF0\x9F\x98\x80"));  // valid 4-byte
  }

  TEST_CASE("missing key, empty header and list of only commas give nullopt") {
    CHECK_FALSE(baggage_get("a=1,b=2", "retry-owner").has_value());
    CHECK_FALSE(baggage_get("", "retry-owner").has_value());
    CHECK_FALSE(baggage_get(" , ,, ", "retry-owner").has_value());
  }

  TEST_CASE("keys are case-sensitive") {
    CHECK_FALSE(baggage_get("Retry-Owner=orders", "retry-owner").has_value());
  }

  TEST_CASE("a key only found as a prefix or inside a value does not match") {
    CHECK_FALSE(baggage_get("retry-owner-x=orders", "retry-owner").has_value());
    CHECK_FALSE(baggage_get("x=retry-owner", "retry-owner").has_value());
    CHECK_FALSE(baggage_get("x=1;retry-owner=orders", "retry-owner").has_value());  // a property, not a member
  }

  TEST_CASE("first of duplicate members wins") {
    CHECK(baggage_get("k=1,k=2", "k") == std::optional<std::string>("1"));
  }

  TEST_CASE("empty value is found as empty") {
    CHECK(baggage_get("k=,x=1", "k") == std::optional<std::string>(""));
  }

  TEST_CASE("malformed members are skipped and later good ones still found") {
    CHECK(baggage_get("garbage,retry-owner=orders", "retry-owner") == std::optional<std::string>("orders"));
    CHECK(baggage_get("bad key=1,k=2", "k") == std::optional<std::string>("2"));
    CHECK(baggage_get("k=has space,k=ok", "k") == std::optional<std::string>("ok"));
    CHECK(baggage_get("k=\"quoted\",k=ok", "k") == std::optional<std::string>("ok"));
    CHECK(baggage_get("k=back\\slash", "k") == std::nullopt);
    CHECK(baggage_get("=v,k", "k") == std::nullopt);
    CHECK(baggage_get("k=caf\xC3\xA9", "k") == std::nullopt);  // raw non-ASCII is not a baggage-octet
  }

  TEST_CASE("a key that is not a token gives nullopt") {
    CHECK_FALSE(baggage_get("a b=1", "a b").has_value());
    CHECK_FALSE(baggage_get("=1", "").has_value());
  }
}

TEST_SUITE("baggage_merge") {
  TEST_CASE("empty or blank header becomes the single member") {
    CHECK(baggage_merge("", "retry-owner", "orders") == std::optional<std::string>("retry-owner=orders"));
    CHECK(baggage_merge("  ", "retry-owner", "orders") == std::optional<std::string>("retry-owner=orders"));
  }

  TEST_CASE("new member is appended after existing members in their order") {
    CHECK(baggage_merge("userId=alice,tenant=42;p=1", "retry-owner", "orders") ==
          std::optional<std::string>("userId=alice,tenant=42;p=1,retry-owner=orders"));
  }

  TEST_CASE("same value already present returns the input byte for byte") {
    const std::string in = " userId=alice ,  retry-owner = orders ;ttl=3 ,x=1 ";
    CHECK(baggage_merge(in, "retry-owner", "orders") == std::optional<std::string>(in));
  }

  TEST_CASE("same value written with different percent-encoding counts as the same") {
    CHECK(baggage_merge("k=%6Frders", "k", "orders") == std::optional<std::string>("k=%6Frders"));
  }

  TEST_CASE("different value is replaced in place, dropping its properties") {
    CHECK(baggage_merge("a=1, retry-owner=edge;ttl=3 ,b=2", "retry-owner", "orders") ==
          std::optional<std::string>("a=1,retry-owner=orders,b=2"));
  }

  TEST_CASE("duplicate members with the key collapse into one") {
    auto r = baggage_merge("retry-owner=orders,a=1,retry-owner=edge,retry-owner=orders", "retry-owner", "orders");
    REQUIRE(r);
    CHECK(*r == "retry-owner=orders,a=1");
    CHECK(members_with_key(*r, "retry-owner") == 1);
  }

  TEST_CASE("a malformed member with our key is replaced, not duplicated") {
    CHECK(baggage_merge("retry-owner=bad value,a=1", "retry-owner", "orders") ==
          std::optional<std::string>("retry-owner=orders,a=1"));
    CHECK(baggage_merge("retry-owner;p,a=1", "retry-owner", "orders") ==
          std::optional<std::string>("retry-owner=orders,a=1"));
  }

  TEST_CASE("malformed members of other keys are kept verbatim") {
    CHECK(baggage_merge("garbage, bad key=1,k=\"q\"", "retry-owner", "o") ==
          std::optional<std::string>("garbage,bad key=1,k=\"q\",retry-owner=o"));
  }

  TEST_CASE("empty list members are dropped when the header is rebuilt") {
    CHECK(baggage_merge(",a=1,, ,b=2,", "k", "v") == std::optional<std::string>("a=1,b=2,k=v"));
  }

  TEST_CASE("value is percent-encoded and reads back decoded") {
    auto r = baggage_merge("a=1", "retry-owner", "orders svc;1,\"x\"%");
    REQUIRE(r);
    CHECK(*r == "a=1,retry-owner=orders%20svc%3B1%2C%22x%22%25");
    CHECK(baggage_get(*r, "retry-owner") == std::optional<std::string>("orders svc;1,\"x\"%"));
  }

  TEST_CASE("merging twice gives the same header as merging once") {
    auto once = baggage_merge(" a=1 ,retry-owner=edge;p, ,b", "retry-owner", "orders");
    REQUIRE(once);
    CHECK(baggage_merge(*once, "retry-owner", "orders") == once);
  }

  TEST_CASE("our member is kept only when its value decodes to exactly ours") {
    CHECK(baggage_merge("k=order%73,a=1", "k", "orders") == std::optional<std::string>("k=order%73,a=1"));
    CHECK(baggage_merge("k=order%73", "k", "orders") == std::optional<std::string>("k=order%73"));
    CHECK(baggage_merge("k=order", "k", "orders") == std::optional<std::string>("k=orders"));
    CHECK(baggage_merge("k=orderss", "k", "orders") == std::optional<std::string>("k=orders"));
    CHECK(baggage_merge("k=%6F%72ders;p", "k", "orders") == std::optional<std::string>("k=%6F%72ders;p"));
    CHECK(baggage_merge("k=", "k", "") == std::optional<std::string>("k="));
    // A percent sign without two hex digits is itself.
    CHECK(baggage_merge("k=%zz", "k", "%zz") == std::optional<std::string>("k=%zz"));
    CHECK(baggage_merge("k=a%7", "k", "a%7") == std::optional<std::string>("k=a%7"));
    CHECK(baggage_merge("k=a%7", "k", "a\x07") == std::optional<std::string>("k=a%07"));
  }

  TEST_CASE("a long input that changes is refused once the rebuilt list passes the limit") {
    // The limit is met by the members before ours already, whether or not
    // the rest would change anything.
    const std::string big = "a=" + std::string(kMaxBaggageBytes, 'x');
    CHECK_FALSE(baggage_merge(big + ",k=old", "k", "v").has_value());
    CHECK_FALSE(baggage_merge("k=old," + big, "k", "v").has_value());
    CHECK_FALSE(baggage_merge(big, "k", "v").has_value());
  }

  TEST_CASE("a key that is not a token is refused") {
    CHECK_FALSE(baggage_merge("a=1", "bad key", "v").has_value());
    CHECK_FALSE(baggage_merge("a=1", "", "v").has_value());
  }

  TEST_CASE("result of exactly 8192 bytes is accepted, 8193 refused") {
    const std::string suffix = ",k=v";  // what the merge appends
    std::string fits = "a=" + std::string(kMaxBaggageBytes - suffix.size() - 2, 'x');
    auto r = baggage_merge(fits, "k", "v");
    REQUIRE(r);
    CHECK(r->size() == kMaxBaggageBytes);

    std::string too_big = fits + "x";
    CHECK_FALSE(baggage_merge(too_big, "k", "v").has_value());
  }

  TEST_CASE("percent-encoding growth counts against the limit") {
    std::string in = "a=" + std::string(kMaxBaggageBytes - 20, 'x');
    CHECK(baggage_merge(in, "k", "vvvvvv").has_value());        // ",k=vvvvvv": +9 bytes, fits 18
    CHECK_FALSE(baggage_merge(in, "k", "      ").has_value());  // 6 spaces encode to 18: +21 bytes
  }

  TEST_CASE("an input already over the limit is refused even when nothing would change") {
    std::string in = "k=v,a=" + std::string(kMaxBaggageBytes, 'x');
    CHECK_FALSE(baggage_merge(in, "k", "v").has_value());
  }

  TEST_CASE("hostile input never crashes and never duplicates the key") {
    const char* inputs[] = {"=", ";", ",", "=;=,=", "k", "k=", "k==v", "k=v=w", ";k=v", "k;=", "%", "k=%", "\t,\t",
                            "k=v;;;;", "k = ", "\x01\x02=\x7F"};
    for (const char* in : inputs) {
      CAPTURE(in);
      auto r = baggage_merge(in, "k", "v");
      REQUIRE(r);
      CHECK(members_with_key(*r, "k") == 1);
      CHECK(baggage_get(*r, "k") == std::optional<std::string>("v"));
    }
  }
}

TEST_SUITE("percent_encode_baggage_value") {
  TEST_CASE("baggage-octets pass, everything else and percent are encoded") {
    CHECK(percent_encode_baggage_value("abc-XYZ_09.~!#$&'()*+/:<=>?@[]^`{|}") == "abc-XYZ_09.~!#$&'()*+/:<=>?@[]^`{|}");
    CHECK(percent_encode_baggage_value(" \",;\\%") == "%20%22%2C%3B%5C%25");
    CHECK(percent_encode_baggage_value(std::string("\x00\x1F\x7F\xC3\xA9", 5)) == "%00%1F%7F%C3%A9");
    CHECK(percent_encode_baggage_value("") == "");
  }

  TEST_CASE("the size and the written bytes are those of the encoded string, for every byte") {
    for (int c = 0; c < 256; ++c) {
      const std::string v = std::string("a") + static_cast<char>(c) + "b";
      const std::string encoded = percent_encode_baggage_value(v);
      REQUIRE(percent_encoded_baggage_size(v) == encoded.size());
      std::string written(encoded.size() + 1, '#');
      char* end = write_percent_encoded_baggage_value(v, written.data());
      CHECK(end == written.data() + encoded.size());
      CHECK(written == encoded + "#");  // nothing past the end
    }
    CHECK(percent_encoded_baggage_size("") == 0);
  }
}
