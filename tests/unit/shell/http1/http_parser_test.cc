// The llhttp wrapper: header fragments joined across split reads, obs-fold
// told apart from a split, head limits, pausing between pipelined messages.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "shell/http1/http_parser.h"

using namespace onelayer;

namespace {

struct Recorder : HttpParser::Handler {
  std::vector<MessageHead> heads;
  std::string body;
  std::vector<Headers> trailers;  // each message's trailer section (when it had fields)
  int ends = 0;
  bool pause_after_message = false;
  int head_result = 0;

  int on_head(MessageHead& head) override {
    heads.push_back(head);
    return head_result;
  }
  int on_body(const char* data, size_t len) override {
    body.append(data, len);
    return 0;
  }
  void on_trailers(Headers& t) override { trailers.push_back(t); }
  int on_message_end() override {
    CHECK(trailers.size() <= static_cast<size_t>(ends) + 1);  // trailers come before their end
    ++ends;
    return pause_after_message ? HPE_PAUSED : 0;
  }
};

// Feeds `in` in pieces of `step` bytes (a new buffer each time, like reads).
void feed_in_steps(HttpParser& p, const std::string& in, size_t step) {
  for (size_t i = 0; i < in.size(); i += step) {
    std::string piece = in.substr(i, step);
    REQUIRE(p.feed(piece.data(), piece.size()) == piece.size());
  }
}

// Feeds `in` in pieces of `step` bytes until the parser stops with an error.
void feed_until_error(HttpParser& p, const std::string& in, size_t step) {
  for (size_t i = 0; i < in.size() && p.error() == HttpParser::Error::none; i += step) {
    std::string piece = in.substr(i, step);
    p.feed(piece.data(), piece.size());
  }
}

const std::string kRequest =
    "POST /items?id=7 HTTP/1.1\r\n"
    "Host: inventory\r\n"
    "X-Long-Header-Name: value with several words\r\n"
    "Content-Length: 11\r\n"
    "\r\n"
    "hello world";

}  // namespace

TEST_CASE("HeadersJoinedWhateverTheReadBoundaries") {
  for (size_t step = 1; step <= kRequest.size(); ++step) {
    Recorder r;
    HttpParser p(HTTP_REQUEST, &r);
    feed_in_steps(p, kRequest, step);
    REQUIRE(r.heads.size() == 1);
    const MessageHead& h = r.heads[0];
    CHECK(h.method == "POST");
    CHECK(h.target == "/items?id=7");
    REQUIRE(h.headers.size() == 3);
    CHECK(h.headers[1].name == "X-Long-Header-Name");
    CHECK(h.headers[1].value == "value with several words");
    CHECK_FALSE(h.obs_fold);  // a split read is never mistaken for a fold
    CHECK(h.has_content_length);
    CHECK(h.content_length == 11);
    CHECK(r.body == "hello world");
    CHECK(r.ends == 1);
  }
}

TEST_CASE("ObsFoldInOneBufferIsReported") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: first\r\n second\r\n\r\n";
  p.feed(in.data(), in.size());
  REQUIRE(r.heads.size() == 1);
  CHECK(r.heads[0].obs_fold);
}

TEST_CASE("ObsFoldSplitAcrossReadsIsStillReported") {
  std::string in = "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: first\r\n second\r\n\r\n";
  // Split inside the continuation line, after its first byte.
  size_t cut = in.find(" second") + 2;
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  std::string a = in.substr(0, cut), b = in.substr(cut);
  p.feed(a.data(), a.size());
  p.feed(b.data(), b.size());
  REQUIRE(r.heads.size() == 1);
  CHECK(r.heads[0].obs_fold);
}

TEST_CASE("ObsFoldIsReportedWhereverTheReadsSplitIt") {
  std::string in = "GET / HTTP/1.1\r\nHost: a\r\nX-Folded: first\r\n second\r\n\r\n";
  for (size_t step = 1; step <= in.size(); ++step) {
    Recorder r;
    HttpParser p(HTTP_REQUEST, &r);
    feed_in_steps(p, in, step);
    REQUIRE(r.heads.size() == 1);
    CHECK_MESSAGE(r.heads[0].obs_fold, "step ", step);
  }
}

TEST_CASE("ValueWhitespaceIsTrimmed") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "GET / HTTP/1.1\r\nHost:   spaced   \r\n\r\n";
  p.feed(in.data(), in.size());
  REQUIRE(r.heads.size() == 1);
  CHECK(r.heads[0].headers[0].value == "spaced");
}

TEST_CASE("HeadOverLimitStopsWithHeadTooLarge") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  p.set_limits(64, 100);
  std::string in = "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(100, 'x') + "\r\n\r\n";
  p.feed(in.data(), in.size());
  CHECK(p.error() == HttpParser::Error::head_too_large);
  CHECK(r.heads.empty());
}

TEST_CASE("TooManyHeaderFieldsStop") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  p.set_limits(1 << 20, 3);
  std::string in = "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
  p.feed(in.data(), in.size());
  CHECK(p.error() == HttpParser::Error::too_many_headers);
}

TEST_CASE("PipelinedRequestsPauseAfterEachMessage") {
  Recorder r;
  r.pause_after_message = true;
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  size_t used = p.feed(in.data(), in.size());
  CHECK(p.error() == HttpParser::Error::paused);
  CHECK(r.heads.size() == 1);
  CHECK(used == in.find("GET /b"));
  p.resume();
  std::string rest = in.substr(used);
  p.feed(rest.data(), rest.size());
  REQUIRE(r.heads.size() == 2);
  CHECK(r.heads[1].target == "/b");
}

TEST_CASE("ChunkedBodyIsDecoded") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  feed_in_steps(p, in, 3);
  REQUIRE(r.heads.size() == 1);
  CHECK(r.heads[0].chunked);
  CHECK(r.body == "hello world");
  CHECK(r.ends == 1);
}

TEST_CASE("SmugglingShapesAreParseErrors") {
  const char* bad[] = {
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFF\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
  };
  for (const char* b : bad) {
    Recorder r;
    HttpParser p(HTTP_REQUEST, &r);
    std::string in = b;
    p.feed(in.data(), in.size());
    CHECK_MESSAGE(p.error() != HttpParser::Error::none, in);
  }
}

TEST_CASE("ResponseHeadCarriesStatusAndFraming") {
  Recorder r;
  HttpParser p(HTTP_RESPONSE, &r);
  std::string in = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 2\r\n\r\nno";
  p.feed(in.data(), in.size());
  REQUIRE(r.heads.size() == 1);
  CHECK(r.heads[0].status == 503);
  CHECK(r.heads[0].reason == "Service Unavailable");
  CHECK(r.body == "no");
}

TEST_CASE("CloseDelimitedResponseEndsAtFinish") {
  Recorder r;
  HttpParser p(HTTP_RESPONSE, &r);
  std::string in = "HTTP/1.1 200 OK\r\n\r\nuntil the end";
  p.feed(in.data(), in.size());
  CHECK(p.message_needs_eof());
  CHECK(r.ends == 0);
  p.finish();
  CHECK(r.ends == 1);
  CHECK(r.body == "until the end");
}

TEST_CASE("ObsFoldAfterAnEmptyFirstLineIsReportedWhereverTheReadsSplitIt") {
  // llhttp itself unfolds these into "Content-Length: 5" and "Host: a".
  const std::string ins[] = {
      "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n 5\r\n\r\nhello",
      "POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\tchunked\r\n\r\n0\r\n\r\n",
      "GET / HTTP/1.1\r\nHost:\r\n a\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n \r\n\r\n",  // a fold of whitespace only
  };
  for (const std::string& in : ins) {
    for (size_t step = 1; step <= in.size(); ++step) {
      Recorder r;
      HttpParser p(HTTP_REQUEST, &r);
      feed_until_error(p, in, step);
      REQUIRE_MESSAGE(r.heads.size() == 1, in, " step ", step);
      CHECK_MESSAGE(r.heads[0].obs_fold, in, " step ", step);
    }
  }
}

TEST_CASE("BareLfAnywhereInTheRequestHeadIsAParseErrorBeforeTheHeadIsHandedOver") {
  const std::string ins[] = {
      "GET / HTTP/1.1\nHost: a\r\n\r\n",        // after the request line
      "GET / HTTP/1.1\r\nHost: a\r\n\n",        // ending the head
      "GET / HTTP/1.0\n\r\n",                   // HTTP/1.0 without fields
      "GET / HTTP/1.1\nHost: a\n\n",
  };
  for (const std::string& in : ins) {
    for (size_t step = 1; step <= in.size(); ++step) {
      Recorder r;
      HttpParser p(HTTP_REQUEST, &r);
      feed_until_error(p, in, step);
      CHECK_MESSAGE(p.error() == HttpParser::Error::parse, in, " step ", step);
      CHECK_MESSAGE(r.heads.empty(), in, " step ", step);
    }
  }
}

TEST_CASE("BareLfInsideARequestBodyIsJustBodyAndTheNextHeadIsScannedAgain") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\na\nb"
                   "GET /next HTTP/1.1\nHost: a\r\n\r\n";
  p.feed(in.data(), in.size());
  REQUIRE(r.heads.size() == 1);
  CHECK(r.body == "a\nb");
  CHECK(p.error() == HttpParser::Error::parse);  // the second head has a bare LF
}

TEST_CASE("RequestsThatFollowOneAnsweredWithoutPausingAreScannedToo") {
  Recorder r;  // on_message_end returns 0: the parser goes on in the same buffer
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nX: 1\r\n 2\r\n\r\n";
  CHECK(p.feed(in.data(), in.size()) == in.size());
  REQUIRE(r.heads.size() == 2);
  CHECK_FALSE(r.heads[0].obs_fold);
  CHECK(r.heads[1].obs_fold);
  CHECK(r.ends == 2);
}

TEST_CASE("AnEmptyLineBeforeTheRequestLineIsNotTakenForTheEndOfTheHead") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  std::string in = "\r\nGET / HTTP/1.1\r\nHost: x\r\nX: 1\r\n 2\r\n\r\n";
  p.feed(in.data(), in.size());
  REQUIRE(r.heads.size() == 1);
  CHECK(r.heads[0].obs_fold);
}

TEST_CASE("HttpParser: a request after one that offered an upgrade is parsed as HTTP/1.1") {
  const std::string offer =
      "GET /a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
      "HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
  const std::string next = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  for (bool pause : {false, true}) {
    Recorder r;
    r.pause_after_message = pause;
    HttpParser p(HTTP_REQUEST, &r);
    std::string in = offer + next;
    size_t used = p.feed(in.data(), in.size());
    if (pause) {
      REQUIRE(p.error() == HttpParser::Error::paused);
      p.resume();
      std::string rest = in.substr(used);
      p.feed(rest.data(), rest.size());
      if (p.error() == HttpParser::Error::paused) p.resume();
    }
    CHECK(p.error() != HttpParser::Error::parse);
    REQUIRE(r.heads.size() == 2);
    CHECK(r.heads[1].target == "/b");
  }
}

TEST_CASE("a chunked body's trailer section reaches the handler apart from the head, before the end") {
  const std::string in =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Head: h\r\n\r\n"
      "5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Rows:  3 \r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  for (size_t step : {in.size(), size_t{1}, size_t{7}}) {
    Recorder r;
    HttpParser p(HTTP_RESPONSE, &r);
    feed_in_steps(p, in, step);
    REQUIRE(r.ends == 2);
    REQUIRE(r.heads.size() == 2);
    CHECK(r.heads[0].headers == Headers{{"Transfer-Encoding", "chunked"}, {"X-Head", "h"}});
    CHECK(p.head().headers == Headers{{"Content-Length", "2"}});  // nothing appended to the head
    REQUIRE(r.trailers.size() == 1);  // the second message had none
    CHECK(r.trailers[0] == Headers{{"X-Checksum", "abc"}, {"X-Rows", "3"}});
    CHECK(r.body == "hellook");
  }
}

TEST_CASE("trailers count against the head limits") {
  Recorder r;
  HttpParser p(HTTP_REQUEST, &r);
  p.set_limits(1 << 20, 2);
  const std::string in =
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
  feed_until_error(p, in, in.size());
  CHECK(p.error() == HttpParser::Error::too_many_headers);
  CHECK(r.trailers.empty());
}

TEST_CASE("TakeRequestCarriesEveryPartAndSwapsTheStorage") {
  MessageHead parsed;
  parsed.method = "POST";
  parsed.target = "/upload";
  parsed.headers = {{"host", "api.example"}, {"content-length", "5"}};
  parsed.http_major = 2;
  parsed.http_minor = 0;
  parsed.obs_fold = true;
  parsed.chunked = true;
  parsed.has_content_length = true;
  parsed.content_length = 5;
  parsed.keep_alive = false;
  parsed.checked_by_codec = true;
  MessageHead taken;
  taken.method = "GET";  // its storage goes back to `parsed`
  taken.take_request(parsed);
  CHECK(taken.method == "POST");
  CHECK(taken.target == "/upload");
  REQUIRE(taken.headers.size() == 2);
  CHECK(taken.headers[0].value == "api.example");
  CHECK((taken.http_major == 2 && taken.http_minor == 0));
  CHECK(taken.obs_fold);
  CHECK(taken.chunked);
  CHECK(taken.has_content_length);
  CHECK(taken.content_length == 5);
  CHECK_FALSE(taken.keep_alive);
  CHECK(taken.checked_by_codec);
  CHECK(parsed.method == "GET");
  CHECK(parsed.headers.empty());
}

TEST_CASE("RequestsThatSwitchProtocolsAreCONNECTAndBodilessUpgrades") {
  auto switches = [](const std::string& in) {
    Recorder r;
    r.pause_after_message = true;
    HttpParser p(HTTP_REQUEST, &r);
    p.feed(in.data(), in.size());
    REQUIRE(r.ends == 1);
    return p.request_switches_protocols();
  };
  CHECK(switches("CONNECT db:5432 HTTP/1.1\r\nHost: db:5432\r\n\r\n"));
  CHECK(switches("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"));
  // An upgrade whose request has a body stays HTTP/1.1 after it (the body
  // is what the server reads next), as does a request without Upgrade.
  CHECK_FALSE(switches("POST /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: websocket\r\n"
                       "Content-Length: 3\r\n\r\nabc"));
  CHECK_FALSE(switches("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK_FALSE(switches("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n"));  // no Connection: upgrade
}
