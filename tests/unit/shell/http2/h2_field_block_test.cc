// H2FieldBlock: an outgoing head's fields in one buffer, names lower-cased.
#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "shell/http2/h2_field_block.h"

using namespace onelayer;

TEST_CASE("h2 field block: names are lower-cased, values kept as given, in order") {
  H2FieldBlock b;
  b.put("Content-Type", "Text/HTML");
  b.put("x-empty", "");
  b.put("X-RETRY-OWNER", "Layer-A");
  REQUIRE(b.size() == 3);
  CHECK(b[0].name == "content-type");
  CHECK(b[0].value == "Text/HTML");
  CHECK(b[1].name == "x-empty");
  CHECK(b[1].value.empty());
  CHECK(b[2].name == "x-retry-owner");
  CHECK(b[2].value == "Layer-A");
  CHECK(b.bytes() == std::string("content-typeText/HTMLx-emptyx-retry-ownerLayer-A").size());
  CHECK(b.headers() == Headers{{"content-type", "Text/HTML"}, {"x-empty", ""}, {"x-retry-owner", "Layer-A"}});
}

TEST_CASE("h2 field block: growing past the reserved room keeps every earlier field") {
  H2FieldBlock b;
  b.reserve(2, 16);
  Headers expected;
  for (int i = 0; i < 200; ++i) {
    std::string name = "X-Field-" + std::to_string(i);
    std::string value(static_cast<size_t>(i % 37), static_cast<char>('a' + i % 26));
    b.put(name, value);
    expected.push_back({"x-field-" + std::to_string(i), value});
  }
  CHECK(b.headers() == expected);
}

TEST_CASE("h2 field block: copies are deep, a moved-from block is empty and usable, clear keeps nothing") {
  H2FieldBlock a;
  a.put("A", "1");
  a.put("B", "2");
  H2FieldBlock copy(a);
  a.clear();
  a.put("C", "3");
  CHECK(copy.headers() == Headers{{"a", "1"}, {"b", "2"}});
  CHECK(a.headers() == Headers{{"c", "3"}});

  H2FieldBlock assigned;
  assigned.put("old", "x");
  assigned = copy;
  CHECK(assigned.headers() == copy.headers());
  assigned = assigned;  // self-assignment changes nothing
  CHECK(assigned.headers() == copy.headers());

  H2FieldBlock moved(std::move(copy));
  CHECK(moved.headers() == Headers{{"a", "1"}, {"b", "2"}});
  CHECK(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from block is empty
  CHECK(copy.bytes() == 0);
  copy.put("D", "4");
  CHECK(copy.headers() == Headers{{"d", "4"}});

  H2FieldBlock target;
  target = std::move(moved);
  CHECK(target.headers() == Headers{{"a", "1"}, {"b", "2"}});
  CHECK(moved.empty());  // NOLINT(bugprone-use-after-move)
  moved.put("E", "5");
  CHECK(moved.headers() == Headers{{"e", "5"}});

  H2FieldBlock empty;
  H2FieldBlock empty_copy(empty);
  CHECK(empty_copy.empty());
  CHECK(empty_copy.bytes() == 0);
}

TEST_CASE("h2 field block: swap trades fields and room, both blocks stay usable") {
  H2FieldBlock a, b;
  a.put("A", std::string(300, 'a'));  // over the first buffer's room
  b.put("B", "2");
  b.put("C", "3");
  a.swap(b);
  CHECK(a.headers() == Headers{{"b", "2"}, {"c", "3"}});
  CHECK(b.headers() == Headers{{"a", std::string(300, 'a')}});
  CHECK(a.bytes() == 4);
  CHECK(b.bytes() == 301);
  a.put("D", std::string(400, 'd'));  // grows what it got, keeping what it holds
  b.put("E", "5");
  CHECK(a.headers() == Headers{{"b", "2"}, {"c", "3"}, {"d", std::string(400, 'd')}});
  CHECK(b.headers() == Headers{{"a", std::string(300, 'a')}, {"e", "5"}});
  H2FieldBlock empty;
  empty.swap(a);
  CHECK(a.empty());
  CHECK(a.bytes() == 0);
  a.put("F", "6");
  CHECK(a.headers() == Headers{{"f", "6"}});
  CHECK(empty.size() == 3);
}
