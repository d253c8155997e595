// H2Session's HPACK encoding of fields whose value is new on every message:
// literals never indexed whose name refers to the encoder's dynamic table
// once a first message has put it there. The session's output is read back
// representation by representation (RFC 7541 6), each paired with what
// nghttp2's own decoder makes of it. Read the same way: a head submitted
// from a field block is encoded from what it was, however its stream ended.
#include <doctest/doctest.h>
#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shell/http2/h2_field_block.h"
#include "shell/http2/h2_session.h"
#include "h2_handler_stub.h"
#include "hpack_block_decoder.h"

using namespace onelayer;

namespace {

// One field of a header block as it was encoded.
struct EncodedField {
  enum class Form { indexed, incremental, without_indexing, never_indexed } form = Form::indexed;
  uint64_t name_index = 0;  // literals: 0 when the name itself is sent
  std::string name, value;  // as decoded
  bool decoder_saw_never_indexed = false;
};

constexpr uint64_t kStaticTableEntries = 61;  // RFC 7541 appendix A

// HPACK integer with an N-bit prefix (RFC 7541 5.1), taken off the front.
uint64_t take_integer(std::string_view& in, int prefix_bits) {
  REQUIRE_FALSE(in.empty());
  const uint64_t all_ones = (uint64_t(1) << prefix_bits) - 1;
  uint64_t v = uint8_t(in.front()) & all_ones;
  in.remove_prefix(1);
  if (v < all_ones) return v;
  for (int shift = 0;; shift += 7) {
    REQUIRE_FALSE(in.empty());
    const uint8_t b = uint8_t(in.front());
    in.remove_prefix(1);
    v += uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

void skip_string_literal(std::string_view& in) {
  const uint64_t length = take_integer(in, 7);
  REQUIRE(in.size() >= length);
  in.remove_prefix(length);
}

// The representations of one header block, in order (table size updates
// left out: they carry no field).
std::vector<EncodedField> representations(std::string_view block) {
  std::vector<EncodedField> out;
  while (!block.empty()) {
    const uint8_t first = uint8_t(block.front());
    EncodedField f;
    if (first & 0x80) {
      take_integer(block, 7);
      out.push_back(f);
      continue;
    }
    if ((first & 0xe0) == 0x20) {
      take_integer(block, 5);
      continue;
    }
    int prefix_bits = 4;
    if (first & 0x40) {
      f.form = EncodedField::Form::incremental;
      prefix_bits = 6;
    } else {
      f.form = first & 0x10 ? EncodedField::Form::never_indexed : EncodedField::Form::without_indexing;
    }
    f.name_index = take_integer(block, prefix_bits);
    if (f.name_index == 0) skip_string_literal(block);
    skip_string_literal(block);
    out.push_back(f);
  }
  return out;
}

// Reads a client session's output: every HEADERS frame's block, each field
// with its form and its decoded name and value.
class HeaderBlockReader {
 public:
  // Whole frames (after the connection preface); returns one list per block.
  std::vector<std::vector<EncodedField>> read(std::string_view bytes) {
    constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    if (bytes.substr(0, kPreface.size()) == kPreface) bytes.remove_prefix(kPreface.size());
    std::vector<std::vector<EncodedField>> blocks;
    while (!bytes.empty()) {
      REQUIRE(bytes.size() >= 9);
      const size_t length = size_t(uint8_t(bytes[0])) << 16 | size_t(uint8_t(bytes[1])) << 8 | uint8_t(bytes[2]);
      const uint8_t type = uint8_t(bytes[3]), flags = uint8_t(bytes[4]);
      REQUIRE(bytes.size() >= 9 + length);
      std::string_view payload = bytes.substr(9, length);
      bytes.remove_prefix(9 + length);
      if (type != 0x1) continue;  // HEADERS only
      REQUIRE((flags & 0x4));     // END_HEADERS: one frame per block here
      REQUIRE_FALSE((flags & 0x28));  // neither PADDED nor PRIORITY
      blocks.push_back(decode(payload));
    }
    return blocks;
  }

 private:
  std::vector<EncodedField> decode(std::string_view block) {
    std::vector<EncodedField> fields = representations(block);
    std::vector<test::DecodedField> decoded = decoder_.decode(block);
    REQUIRE(decoded.size() == fields.size());
    for (size_t i = 0; i < fields.size(); ++i) {
      fields[i].name = decoded[i].name;
      fields[i].value = decoded[i].value;
      fields[i].decoder_saw_never_indexed = decoded[i].never_indexed;
    }
    return fields;
  }

  test::HpackBlockDecoder decoder_;
};

// A copy: the block is often a temporary.
EncodedField field_named(const std::vector<EncodedField>& block, std::string_view name) {
  for (const EncodedField& f : block)
    if (f.name == name) return f;
  FAIL("no field " << name);
  return {};
}

// A client session whose requests are read back as encoded.
struct EncodingClient {
  test::H2HandlerStub handler;
  H2Session session{H2Session::Role::client, &handler};
  HeaderBlockReader reader;

  // The block of the one request in `submit` (which submits it).
  template <class Submit>
  std::vector<EncodedField> encode(Submit submit) {
    REQUIRE(submit(session) > 0);
    std::string out;
    session.flush(out);
    std::vector<std::vector<EncodedField>> blocks = reader.read(out);
    REQUIRE(blocks.size() == 1);
    return blocks.front();
  }

  // A request with the fields of `fields` (names in lower case).
  std::vector<EncodedField> request(const Headers& fields) {
    return encode([&](H2Session& s) {
      H2Session::Head head;
      head.method = "POST";
      head.scheme = "http";
      head.authority = "origin.test";
      head.path = "/orders";
      head.fields = fields;
      return s.submit_request(head, true);
    });
  }

  // The same from a field block (the upstream path).
  std::vector<EncodedField> request_from_block(const Headers& fields) {
    return encode([&](H2Session& s) {
      H2FieldBlock block;
      for (const Header& h : fields) block.put(h.name, h.value);
      return s.submit_request({"POST", "http", "origin.test", "/orders"}, block, true);
    });
  }
};

Headers per_request_fields(int n) {
  return {{"x-retry-owner", "onelayer"},
          {"baggage", "retry-owner=onelayer,retry-attempt=" + std::to_string(1000003 * n) + ".1"},
          {"x-request-timeout-ms", std::to_string(30000 - n)}};
}

using Form = EncodedField::Form;

void check_seed(const EncodedField& f, const std::string& value) {
  CHECK(f.form == Form::incremental);
  CHECK(f.value == value);
}

void check_never_indexed_by_dynamic_name(const EncodedField& f, const std::string& value) {
  CHECK(f.form == Form::never_indexed);
  CHECK(f.name_index > kStaticTableEntries);  // a dynamic-table entry's name
  CHECK(f.decoder_saw_never_indexed);         // the next hop must not index it either
  CHECK(f.value == value);
}

}  // namespace

TEST_CASE("h2 hpack: a never-indexed field refers to its name in the dynamic table after the first message") {
  EncodingClient c;
  bool from_block = false;
  SUBCASE("from a Head") {}
  SUBCASE("from a field block") { from_block = true; }
  auto send = [&](int n) {
    Headers fields = per_request_fields(n);
    return from_block ? c.request_from_block(fields) : c.request(fields);
  };
  std::vector<EncodedField> first = send(0);
  for (const char* name : {"baggage", "x-request-timeout-ms"}) {
    CAPTURE(name);
    EncodedField f = field_named(first, name);
    check_seed(f, find_header(per_request_fields(0), name)->value);
    CHECK(f.name_index == 0);  // neither name is in the static table
  }
  for (int n = 1; n < 64; ++n) {
    CAPTURE(n);
    std::vector<EncodedField> block = send(n);
    for (const char* name : {"baggage", "x-request-timeout-ms"}) {
      CAPTURE(name);
      check_never_indexed_by_dynamic_name(field_named(block, name), find_header(per_request_fields(n), name)->value);
    }
    // A field that repeats is still found whole in the table.
    CHECK(field_named(block, "x-retry-owner").form == Form::indexed);
  }
  // The 65th use seeds the name again, referring to the entry already there.
  std::vector<EncodedField> reseed = send(64);
  EncodedField baggage = field_named(reseed, "baggage");
  check_seed(baggage, find_header(per_request_fields(64), "baggage")->value);
  CHECK(baggage.name_index > kStaticTableEntries);
  check_never_indexed_by_dynamic_name(field_named(send(65), "baggage"),
                                      find_header(per_request_fields(65), "baggage")->value);
}

TEST_CASE("h2 hpack: a seeded name pushed out of the dynamic table is seeded again on its 65th use") {
  EncodingClient c;
  c.request(per_request_fields(0));
  // New values that are indexed, more than the 4096-byte table holds, ahead
  // of the baggage field: its entry is evicted before it is encoded.
  Headers churn;
  for (int i = 0; i < 60; ++i) churn.push_back({"x-churn-" + std::to_string(i), std::string(80, char('a' + i % 26))});
  Headers fields = churn;
  fields.push_back({"baggage", "retry-attempt=1"});
  EncodedField evicted = field_named(c.request(fields), "baggage");
  CHECK(evicted.form == Form::never_indexed);
  CHECK(evicted.name_index == 0);
  for (int n = 2; n < 64; ++n) {
    CAPTURE(n);
    EncodedField f = field_named(c.request({{"baggage", "retry-attempt=" + std::to_string(n)}}), "baggage");
    CHECK(f.form == Form::never_indexed);
    CHECK(f.name_index == 0);  // gone from the table until the next seed
  }
  EncodedField seeded = field_named(c.request({{"baggage", "retry-attempt=64"}}), "baggage");
  check_seed(seeded, "retry-attempt=64");
  CHECK(seeded.name_index == 0);
  check_never_indexed_by_dynamic_name(field_named(c.request({{"baggage", "retry-attempt=65"}}), "baggage"),
                                      "retry-attempt=65");
}

TEST_CASE("h2 hpack: a time left that repeats the previous one goes indexed, a new one never indexed") {
  // A first attempt sent as soon as its request arrived carries the whole
  // route timeout less a fraction of a millisecond: the same value on
  // request after request, worth a slot of the table.
  bool from_block = false;
  SUBCASE("from a Head") {}
  SUBCASE("from a field block") { from_block = true; }
  for (const char* name : {"x-request-timeout-ms", "grpc-timeout"}) {
    CAPTURE(name);
    EncodingClient c;
    auto send = [&](const std::string& value) {
      Headers fields{{name, value}};
      return field_named(from_block ? c.request_from_block(fields) : c.request(fields), name);
    };
    check_seed(send("14999"), "14999");  // the first: the name enters the table
    EncodedField same = send("14999");   // found whole: one byte
    CHECK(same.form == Form::indexed);
    CHECK(same.value == "14999");
    check_never_indexed_by_dynamic_name(send("12000"), "12000");  // new: not worth a slot
    EncodedField again = send("12000");                            // repeated: enters the table
    CHECK(again.form == Form::incremental);
    CHECK(again.name_index > kStaticTableEntries);
    CHECK(again.value == "12000");
    CHECK(send("12000").form == Form::indexed);
    CHECK(send("14999").form == Form::never_indexed);  // still in the table, but not the last one sent
    CHECK(send("14999").form == Form::indexed);
  }
}

TEST_CASE("h2 hpack: the time-left rule follows the configured request timeout header name") {
  // headers.request_timeout_ms renamed: the configured name is the
  // time-left field, and x-request-timeout-ms is an ordinary field.
  EncodingClient c;
  c.session.set_request_timeout_name("X-Deadline-Ms");
  auto send = [&](const char* name, const std::string& value) {
    return field_named(c.request({{name, value}}), name);
  };
  check_seed(send("x-deadline-ms", "14999"), "14999");
  CHECK(send("x-deadline-ms", "14999").form == Form::indexed);
  check_never_indexed_by_dynamic_name(send("x-deadline-ms", "12000"), "12000");
  for (int n = 0; n < 3; ++n) {
    CAPTURE(n);
    const EncodedField f = send("x-request-timeout-ms", std::to_string(30000 - n));
    CHECK(f.form == Form::incremental);  // indexed: a new entry for each new value
    CHECK_FALSE(f.decoder_saw_never_indexed);
  }
}

TEST_CASE("h2 hpack: a field off the never-indexed list enters the table once and is then found whole") {
  EncodingClient c;
  for (int n = 0; n < 3; ++n) {
    CAPTURE(n);
    const EncodedField f = field_named(c.request({{"x-plain", "same"}, {"baggage", std::to_string(n)}}), "x-plain");
    CHECK(f.form == (n == 0 ? Form::incremental : Form::indexed));
    CHECK_FALSE(f.decoder_saw_never_indexed);
  }
}

TEST_CASE("h2 a head from a field block whose stream was dropped before it was written still goes out as it was") {
  // close_streams() drops the session's record of the stream while nghttp2
  // still has the HEADERS queued: what its names and values point at must
  // outlive the record, untouched by the heads submitted after it.
  EncodingClient c;
  H2FieldBlock first;
  first.put("x-first", std::string(40, 'a'));
  REQUIRE(c.session.submit_request({"POST", "http", "origin.test", "/one"}, first, true) > 0);
  c.session.close_streams();
  CHECK(c.session.open_streams() == 0);
  for (int i = 0; i < 3; ++i) {
    H2FieldBlock later;
    later.put("x-later", std::string(40, char('b' + i)));
    REQUIRE(c.session.submit_request({"POST", "http", "origin.test", "/later"}, later, true) > 0);
  }
  std::string out;
  c.session.flush(out);
  std::vector<std::vector<EncodedField>> blocks = c.reader.read(out);
  REQUIRE(blocks.size() == 4);
  CHECK(field_named(blocks[0], ":path").value == "/one");
  CHECK(field_named(blocks[0], "x-first").value == std::string(40, 'a'));
  for (int i = 0; i < 3; ++i) CHECK(field_named(blocks[1 + i], "x-later").value == std::string(40, char('b' + i)));
}
