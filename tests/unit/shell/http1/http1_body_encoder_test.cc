#include "shell/http1/http1_body_encoder.h"

#include <doctest/doctest.h>

#include <string>

using namespace onelayer;

namespace {

std::string joined(const uv_buf_t* parts, unsigned n) {
  std::string out;
  for (unsigned i = 0; i < n; ++i) out.append(parts[i].base, parts[i].len);
  return out;
}

}  // namespace

TEST_CASE("ResponseFramingFollowsLengthBodyAndClientVersion") {
  CHECK(response_framing(true, false, true) == BodyFraming::length);
  CHECK(response_framing(true, false, false) == BodyFraming::length);
  CHECK(response_framing(false, false, true) == BodyFraming::chunked);
  CHECK(response_framing(false, false, false) == BodyFraming::close_delimited);
  CHECK(response_framing(true, true, true) == BodyFraming::none);
  CHECK(response_framing(false, true, false) == BodyFraming::none);
}

TEST_CASE("ChunkedPiecesGetAHexSizeLineAndCrlfAndTheBodyEndsWithTheLastChunk") {
  Http1BodyEncoder e(BodyFraming::chunked);
  uv_buf_t parts[3];
  const std::string piece(300, 'x');
  unsigned n = e.frame(piece, parts);
  CHECK(n == 3);
  CHECK(joined(parts, n) == "12c\r\n" + piece + "\r\n");
  std::string out = "head";
  e.append(out, "abc");
  CHECK(out == "head3\r\nabc\r\n");
  CHECK(e.last() == "0\r\n\r\n");
  std::string lines;
  e.append_head_lines(lines, 0, "gzip");
  CHECK(lines == "Transfer-Encoding: gzip, chunked\r\n");
  lines.clear();
  e.append_head_lines(lines, 0);
  CHECK(lines == "Transfer-Encoding: chunked\r\n");
}

TEST_CASE("LengthAndCloseDelimitedBodiesPassBytesAsTheyAre") {
  for (BodyFraming f : {BodyFraming::length, BodyFraming::close_delimited, BodyFraming::none}) {
    Http1BodyEncoder e(f);
    uv_buf_t parts[3];
    unsigned n = e.frame("abc", parts);
    CHECK(n == 1);
    CHECK(joined(parts, n) == "abc");
    std::string out;
    e.append(out, "de");
    CHECK(out == "de");
    CHECK(e.last().empty());
  }
}

TEST_CASE("HeadLinesDeclareTheLengthOnlyWhereItApplies") {
  std::string out;
  Http1BodyEncoder(BodyFraming::length).append_head_lines(out, 42);
  CHECK(out == "Content-Length: 42\r\n");
  out.clear();
  Http1BodyEncoder(BodyFraming::close_delimited).append_head_lines(out, 42);
  CHECK(out.empty());
  Http1BodyEncoder(BodyFraming::none).append_head_lines(out, 42);
  CHECK(out.empty());  // a 204 says nothing
  Http1BodyEncoder(BodyFraming::none).append_head_lines(out, 42, {}, true);
  CHECK(out == "Content-Length: 42\r\n");  // HEAD and 304 keep the announced length
}

TEST_CASE("TrailersGoInTheLastChunkAndOnlyAChunkedBodyCarriesThem") {
  const Headers trailers = {{"X-Checksum", "abc"}, {"grpc-status", "0"}};
  std::string out = "body";
  Http1BodyEncoder(BodyFraming::chunked).append_last(out, trailers);
  CHECK(out == "body0\r\nX-Checksum: abc\r\ngrpc-status: 0\r\n\r\n");
  out.clear();
  Http1BodyEncoder(BodyFraming::chunked).append_last(out, {});
  CHECK(out == "0\r\n\r\n");
  for (BodyFraming f : {BodyFraming::length, BodyFraming::none, BodyFraming::close_delimited}) {
    out.clear();
    Http1BodyEncoder(f).append_last(out, trailers);
    CHECK(out.empty());
  }
}
