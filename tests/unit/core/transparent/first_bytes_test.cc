#include "core/transparent/first_bytes.h"

#include <doctest/doctest.h>

#include <string>

using namespace onelayer;

TEST_CASE("classify_first_bytes: HTTP/1 request lines of every known method are http1") {
  for (const char* m : {"GET / HTTP/1.1\r\n", "HEAD /x HTTP/1.0\r\n", "POST /a HTTP/1.1\r\n", "PUT / ", "DELETE / ",
                        "CONNECT a:1 ", "OPTIONS * ", "TRACE / ", "PATCH / "}) {
    INFO(m);
    CHECK(classify_first_bytes(m) == FirstBytes::http1);
  }
}

TEST_CASE("classify_first_bytes: a prefix of a method or of the h2 preface waits for more") {
  CHECK(classify_first_bytes("") == FirstBytes::need_more);
  CHECK(classify_first_bytes("G") == FirstBytes::need_more);
  CHECK(classify_first_bytes("GET") == FirstBytes::need_more);
  CHECK(classify_first_bytes("DELE") == FirstBytes::need_more);
  CHECK(classify_first_bytes("PRI * HTTP/2") == FirstBytes::need_more);
  CHECK(classify_first_bytes("P") == FirstBytes::need_more);  // PUT, POST, PATCH or PRI
}

TEST_CASE("classify_first_bytes: the full HTTP/2 preface is h2c") {
  CHECK(classify_first_bytes(std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04", 28)) == FirstBytes::h2c);
  CHECK(classify_first_bytes("PRI * HTTP/2.0\r\n\r\nXX") == FirstBytes::other);
}

TEST_CASE("classify_first_bytes: a TLS handshake record is tls, anything else is other") {
  CHECK(classify_first_bytes(std::string("\x16\x03\x01\x02\x00\x01", 6)) == FirstBytes::tls);
  CHECK(classify_first_bytes(std::string("\x16", 1)) == FirstBytes::need_more);
  CHECK(classify_first_bytes(std::string("\x16\x01", 2)) == FirstBytes::other);
  CHECK(classify_first_bytes("SSH-2.0-OpenSSH_9.2\r\n") == FirstBytes::other);
  CHECK(classify_first_bytes("get / HTTP/1.1\r\n") == FirstBytes::other);  // methods are case-sensitive
  CHECK(classify_first_bytes("GETX / HTTP/1.1\r\n") == FirstBytes::other);
  CHECK(classify_first_bytes(std::string("\x00\x00\x00", 3)) == FirstBytes::other);
  CHECK(std::string(passthrough_reason(FirstBytes::tls)) == "tls");
  CHECK(std::string(passthrough_reason(FirstBytes::other)) == "unknown");
}
