// The HTTP/2 front refuses the methods the HTTP/1.1 front's parser refuses:
// core's list (is_known_method) must be llhttp's, checked here against
// llhttp itself.
#include <doctest/doctest.h>
#include <llhttp.h>

#include <string>

#include "core/request/request_validation.h"

using namespace onelayer;

namespace {

bool llhttp_accepts(const std::string& method) {
  llhttp_settings_t settings;
  llhttp_settings_init(&settings);
  llhttp_t p;
  llhttp_init(&p, HTTP_REQUEST, &settings);
  const std::string req = method + " / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
  const llhttp_errno_t e = llhttp_execute(&p, req.data(), req.size());
  return e == HPE_OK || e == HPE_PAUSED_UPGRADE;  // CONNECT pauses for its tunnel
}

}  // namespace

TEST_CASE("KnownMethodsAreExactlyTheOnesLlhttpAccepts") {
  int known = 0;
#define ONELAYER_CHECK_METHOD(num, name, string)                  \
  {                                                               \
    INFO(#string);                                                \
    CHECK(is_known_method(#string) == llhttp_accepts(#string));   \
    known += is_known_method(#string) ? 1 : 0;                    \
  }
  HTTP_ALL_METHOD_MAP(ONELAYER_CHECK_METHOD)
#undef ONELAYER_CHECK_METHOD
  CHECK(known == 34);
  for (const char* m : {"get", "FROB", "GETX", "QUERY", "PRI", "Get", ""}) {
    INFO(m);
    CHECK_FALSE(is_known_method(m));
    CHECK_FALSE(llhttp_accepts(m));
  }
}
