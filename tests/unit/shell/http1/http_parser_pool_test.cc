// HttpParserPool: a taken parser behaves as a new one whatever state its
// last owner left it in, given-back parsers are reused, and the pool keeps
// no more than kMaxSpare of them.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "shell/http1/http_parser_pool.h"

using namespace onelayer;

namespace {

struct Heads : HttpParser::Handler {
  std::vector<MessageHead> heads;
  int ends = 0;
  int on_head(MessageHead& head) override {
    heads.push_back(head);
    return 0;
  }
  int on_body(const char*, size_t) override { return 0; }
  int on_message_end() override {
    ++ends;
    return HPE_PAUSED;
  }
};

size_t feed(HttpParser& p, const std::string& s) { return p.feed(s.data(), s.size()); }

}  // namespace

TEST_CASE("PooledParserGivenBackPausedComesBackLikeNew") {
  HttpParserPool pool;
  Heads first, second;
  std::unique_ptr<HttpParser> p = pool.take(HTTP_REQUEST, &first);
  p->set_limits(40, 2);
  const std::string two = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n";
  CHECK(feed(*p, two) < two.size());  // paused after the first message
  CHECK(p->error() == HttpParser::Error::paused);
  HttpParser* raw = p.get();
  pool.give_back(p);
  CHECK(p == nullptr);
  CHECK(pool.spare() == 1);

  // Taken for the other direction, with the default limits again: a head
  // over the old 40-byte limit with three fields parses.
  std::unique_ptr<HttpParser> q = pool.take(HTTP_RESPONSE, &second);
  CHECK(q.get() == raw);
  CHECK(pool.spare() == 0);
  CHECK_FALSE(q->in_message());
  CHECK(q->error() == HttpParser::Error::none);
  const std::string resp = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nContent-Length: 0\r\n\r\n";
  CHECK(feed(*q, resp) == resp.size());
  REQUIRE(second.heads.size() == 1);
  CHECK(second.heads[0].status == 200);
  CHECK(second.heads[0].headers.size() == 3);
  CHECK(first.heads.size() == 1);  // the old owner hears nothing more
  pool.give_back(q);
}

TEST_CASE("PooledParserGivenBackAfterAParseErrorParsesAgain") {
  HttpParserPool pool;
  Heads h;
  std::unique_ptr<HttpParser> p = pool.take(HTTP_REQUEST, &h);
  feed(*p, "GARBAGE\r\n\r\n");
  CHECK(p->error() == HttpParser::Error::parse);
  pool.give_back(p);
  p = pool.take(HTTP_REQUEST, &h);
  const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  CHECK(feed(*p, req) == req.size());
  CHECK(h.ends == 1);
  REQUIRE(h.heads.size() == 1);
  CHECK(h.heads[0].target == "/");
}

TEST_CASE("PoolKeepsAtMostMaxSpareParsers") {
  HttpParserPool pool;
  Heads h;
  std::vector<std::unique_ptr<HttpParser>> lent;
  for (size_t i = 0; i < HttpParserPool::kMaxSpare + 5; ++i) lent.push_back(pool.take(HTTP_REQUEST, &h));
  for (auto& p : lent) pool.give_back(p);
  CHECK(pool.spare() == HttpParserPool::kMaxSpare);
  std::unique_ptr<HttpParser> none;
  pool.give_back(none);  // nothing to give: harmless
  CHECK(pool.spare() == HttpParserPool::kMaxSpare);
}

namespace {

// Records whether the parser said it was feeding while its callbacks ran.
struct FeedingProbe : HttpParser::Handler {
  HttpParser* parser = nullptr;
  std::vector<bool> seen;
  int on_head(MessageHead&) override {
    seen.push_back(parser->feeding());
    return 0;
  }
  int on_body(const char*, size_t) override { return 0; }
  int on_message_end() override {
    seen.push_back(parser->feeding());
    return 0;
  }
};

}  // namespace

TEST_CASE("ParserSaysItIsFeedingOnlyWhileItsCallbacksRun") {
  HttpParserPool pool;
  FeedingProbe h;
  std::unique_ptr<HttpParser> p = pool.take(HTTP_REQUEST, &h);
  h.parser = p.get();
  CHECK_FALSE(p->feeding());
  const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  CHECK(feed(*p, req) == req.size());
  CHECK(h.seen == std::vector<bool>{true, true});
  CHECK_FALSE(p->feeding());
}
