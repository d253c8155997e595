// detect_h2_preface: the HTTP/1 connection asks it of a client's first
// bytes before it knows which codec keeps the connection.
#include <doctest/doctest.h>

#include <string>

#include "shell/stream/h2_preface.h"

using namespace onelayer;

TEST_CASE("h2 preface: yes, no, or need more on partial input") {
  const std::string p(kH2Preface);
  const std::string settings("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);  // an empty SETTINGS frame
  CHECK(detect_h2_preface("") == H2Preface::need_more);
  CHECK(detect_h2_preface("P") == H2Preface::need_more);
  CHECK(detect_h2_preface(p.substr(0, 23)) == H2Preface::need_more);
  CHECK(detect_h2_preface(p) == H2Preface::yes);
  CHECK(detect_h2_preface(p + settings) == H2Preface::yes);
  CHECK(detect_h2_preface("GET / HTTP/1.1\r\n") == H2Preface::no);
  CHECK(detect_h2_preface("PRI * HTTP/1.1\r\n") == H2Preface::no);  // differs at byte 10
  CHECK(detect_h2_preface("PUT") == H2Preface::no);
  CHECK(detect_h2_preface(p.substr(0, 17) + "XX") == H2Preface::no);
}
