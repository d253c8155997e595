#include "core/base/http_status.h"

#include <doctest/doctest.h>

#include <string>

using namespace onelayer;

TEST_CASE("StatusTextGivesTheStandardPhraseOrTheClassOfTheCode") {
  CHECK(std::string(status_text(200)) == "OK");
  CHECK(std::string(status_text(404)) == "Not Found");
  CHECK(std::string(status_text(414)) == "URI Too Long");  // once only in the admin listener's table
  CHECK(std::string(status_text(409)) == "Conflict");      // once only in the demo upstream's
  CHECK(std::string(status_text(417)) == "Expectation Failed");
  CHECK(std::string(status_text(504)) == "Gateway Timeout");
  CHECK(std::string(status_text(103)) == "Informational");
  CHECK(std::string(status_text(299)) == "OK");
  CHECK(std::string(status_text(308)) == "Redirect");
  CHECK(std::string(status_text(418)) == "Client Error");
  CHECK(std::string(status_text(599)) == "Server Error");
}
