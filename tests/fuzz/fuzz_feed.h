// Drives the shell's llhttp wrapper (proxy/shell/http1/http_parser.h) the way the
// shell's connections do, for the HTTP fuzz targets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "shell/http1/http_parser.h"

namespace fuzz {

// Feeds `data` in the given pieces like the shell does: after a message end
// the parser pauses; the rest of the piece is fed again after resume().
// Stops at the first error. Returns the final error.
inline onelayer::HttpParser::Error feed_pieces(onelayer::HttpParser& p, std::string_view data,
                                               const std::vector<size_t>& cuts, bool eof) {
  using E = onelayer::HttpParser::Error;
  size_t start = 0;
  std::vector<size_t> ends(cuts);
  ends.push_back(data.size());
  for (size_t end : ends) {
    if (end < start || end > data.size()) continue;
    std::string piece(data.substr(start, end - start));  // own buffer, like a read
    size_t off = 0;
    while (true) {
      size_t used = p.feed(piece.data() + off, piece.size() - off);
      if (p.error() == E::paused) {
        FUZZ_REQUIRE(used <= piece.size() - off);
        off += used;
        p.resume();
        if (off == piece.size()) break;
        continue;
      }
      if (p.error() != E::none) return p.error();
      break;
    }
    start = end;
  }
  if (eof) {
    E e = p.finish();
    if (e == E::paused) {
      p.resume();
      return E::none;
    }
    return e;
  }
  return p.error();
}

}  // namespace fuzz
