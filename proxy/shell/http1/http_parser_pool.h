// HttpParserPool: one worker's parsers, lent to connections only while a
// message is in progress. An idle keep-alive connection holds none (a
// parser with its head is about 300 bytes, a third of what such a
// connection cost). Given-back parsers wait for the next taker, up to
// kMaxSpare of them (the head keeps its capacity, so a busy worker does not
// allocate per request); past that they are freed.
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "shell/http1/http_parser.h"

namespace onelayer {

class HttpParserPool {
 public:
  static constexpr size_t kMaxSpare = 64;

  // A parser as if just constructed with (type, handler).
  std::unique_ptr<HttpParser> take(llhttp_type_t type, HttpParser::Handler* handler) {
    if (spare_.empty()) return std::make_unique<HttpParser>(type, handler);
    std::unique_ptr<HttpParser> p = std::move(spare_.back());
    spare_.pop_back();
    p->start_over(type, handler);
    return p;
  }
  // Takes `p` back (nothing if null); `p` is null afterwards.
  void give_back(std::unique_ptr<HttpParser>& p) {
    if (p && spare_.size() < kMaxSpare) spare_.push_back(std::move(p));
    p.reset();
  }
  size_t spare() const { return spare_.size(); }

 private:
  std::vector<std::unique_ptr<HttpParser>> spare_;
};

}  // namespace onelayer
