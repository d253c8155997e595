// The access-log line, byte for byte, in both formats (docs/operations.md "Logs").
#include <doctest/doctest.h>

#include <string>

#include "shell/io/logging.h"

using onelayer::AccessRecord;
using onelayer::format_access_log;
using onelayer::LogFormat;

namespace {

AccessRecord sample() {
  AccessRecord r;
  r.listener = "outbound";
  r.route = "inventory-read";
  r.method = "GET";
  r.path = "/items/7";
  r.status = 200;
  r.attempts = 3;
  r.retry_reasons = "503,503";
  r.upstream_endpoints = "127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8081";
  r.duration_ms = 61.412;
  r.bytes_in = 0;
  r.bytes_out = 512;
  r.unix_ms = 1795970576919;  // 2026-11-29T16:42:56.919Z
  return r;
}

std::string line(const AccessRecord& r, LogFormat f) {
  std::string out;
  format_access_log(r, f, out);
  return out;
}

}  // namespace

TEST_CASE("access log text line has every field in order, '-' for empty values") {
  CHECK(line(sample(), LogFormat::text) ==
        "2026-11-29T16:42:56.919Z listener=outbound route=inventory-read method=GET path=/items/7 status=200 "
        "attempts=3 hedges=0 retry_reasons=503,503 declined=- error=- "
        "upstream=127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8081 duration_ms=61.412 bytes_in=0 bytes_out=512 protocol=http1 stream=0\n");
}

TEST_CASE("access log JSON line is one object with typed fields") {
  CHECK(line(sample(), LogFormat::json) ==
        "{\"time\":\"2026-11-29T16:42:56.919Z\",\"listener\":\"outbound\",\"route\":\"inventory-read\","
        "\"method\":\"GET\",\"path\":\"/items/7\",\"status\":200,\"attempts\":3,\"hedges\":0,\"retry_reasons\":\"503,503\","
        "\"declined\":\"\",\"error\":\"\",\"upstream\":\"127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8081\","
        "\"duration_ms\":61.412,\"bytes_in\":0,\"bytes_out\":512,\"protocol\":\"http1\",\"stream\":0}\n");
}

TEST_CASE("access log durations keep three decimals, round to the microsecond, never go negative") {
  AccessRecord r = sample();
  auto duration = [&](double ms) {
    r.duration_ms = ms;
    std::string l = line(r, LogFormat::text);
    size_t at = l.find("duration_ms=") + 12;
    return l.substr(at, l.find(' ', at) - at);
  };
  CHECK(duration(0) == "0.000");
  CHECK(duration(0.0004) == "0.000");
  CHECK(duration(0.0006) == "0.001");
  CHECK(duration(1.5) == "1.500");
  CHECK(duration(9.9999) == "10.000");
  CHECK(duration(123456.789) == "123456.789");
  CHECK(duration(-3.2) == "0.000");
}

TEST_CASE("access log milliseconds of the time are zero-padded") {
  AccessRecord r = sample();
  r.unix_ms = 1795970576007;
  CHECK(line(r, LogFormat::text).rfind("2026-11-29T16:42:56.007Z ", 0) == 0);
  r.unix_ms = 1795970577000;
  CHECK(line(r, LogFormat::text).rfind("2026-11-29T16:42:57.000Z ", 0) == 0);
}

TEST_CASE("access log values with spaces, quotes or control bytes are quoted and escaped") {
  AccessRecord r = sample();
  r.path = "/a b\"c\x01";
  std::string text = line(r, LogFormat::text);
  CHECK(text.find(" path=\"/a b\\\"c\\u0001\" ") != std::string::npos);
  std::string json = line(r, LogFormat::json);
  CHECK(json.find("\"path\":\"/a b\\\"c\\u0001\"") != std::string::npos);
}

TEST_CASE("access log appends to what the buffer holds") {
  std::string out = "previous\n";
  format_access_log(sample(), LogFormat::text, out);
  CHECK(out.rfind("previous\n2026-11-29T16:42:56.919Z listener=outbound ", 0) == 0);
  CHECK(out.back() == '\n');
}

TEST_CASE("access log ends with grpc_status for gRPC calls only") {
  AccessRecord r = sample();
  CHECK(line(r, LogFormat::text).find("grpc_status") == std::string::npos);
  r.grpc_status = 14;
  const std::string text = line(r, LogFormat::text);
  CHECK(text.size() > 16);
  CHECK(text.substr(text.size() - 16) == " grpc_status=14\n");
  const std::string json = line(r, LogFormat::json);
  const std::string tail = ",\"grpc_status\":14}\n";
  CHECK(json.substr(json.size() - tail.size()) == tail);
  r.grpc_status = 0;
  CHECK(line(r, LogFormat::text).find(" grpc_status=0\n") != std::string::npos);
}

TEST_CASE("access log time: the wall clock from a steady reading, within a few ms of reading the wall clock") {
  using namespace std::chrono;
  auto wall_now = [] { return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count(); };
  const int64_t before = wall_now();
  const int64_t got = onelayer::access_log_unix_ms(steady_clock::now());
  const int64_t after = wall_now();
  CHECK(got >= before - 2);
  CHECK(got <= after + 2);
  // Half a second later on the steady clock, half a second later on the
  // wall (the offset is reused, not read again).
  const auto t = steady_clock::now();
  const int64_t a = onelayer::access_log_unix_ms(t);
  CHECK(onelayer::access_log_unix_ms(t + milliseconds(500)) == a + 500);
  // A reading a second or more past the last sample takes the offset again,
  // against the wall clock read then (readings are always "now" in use).
  const int64_t later = onelayer::access_log_unix_ms(t + seconds(5));
  CHECK(std::llabs(later - wall_now()) < 50);
}

TEST_CASE("access log: the most escaped values and the largest numbers fit, in both formats") {
  std::string controls;
  for (int i = 0; i < 3000; ++i) controls.push_back(static_cast<char>(i % 32));  // every one becomes \u00XX
  const std::string quotes(500, '"');
  AccessRecord r = sample();
  r.path = controls;
  r.error = controls;
  r.route = quotes;
  r.bytes_in = UINT64_MAX;
  r.bytes_out = 1234567890123456789ULL;
  r.stream_id = UINT32_MAX;
  r.attempts = 100;
  r.grpc_status = 16;
  std::string escaped;
  onelayer::append_json_string(escaped, controls);  // the escaping every other log line uses
  for (LogFormat f : {LogFormat::text, LogFormat::json}) {
    std::string before = "kept|";
    std::string out = before;
    format_access_log(r, f, out);
    CHECK(out.compare(0, before.size(), before) == 0);
    CHECK(out.back() == '\n');
    CHECK(out.find(escaped) != std::string::npos);
    CHECK(out.find("18446744073709551615") != std::string::npos);
    CHECK(out.find("1234567890123456789") != std::string::npos);
    CHECK(out.find("4294967295") != std::string::npos);
    CHECK(out.find(f == LogFormat::json ? "\"attempts\":100," : " attempts=100 ") != std::string::npos);
    CHECK(out.find(f == LogFormat::json ? "\"grpc_status\":16}" : " grpc_status=16\n") != std::string::npos);
  }
}

TEST_CASE("access log: numbers of every length are written whole") {
  AccessRecord r = sample();
  uint64_t v = 1;
  for (int digits = 1; digits <= 20; ++digits) {
    r.bytes_out = v;
    std::string l = line(r, LogFormat::text);
    CHECK(l.find(" bytes_out=" + std::to_string(v) + " ") != std::string::npos);
    if (digits < 20) v = v * 10 + static_cast<uint64_t>(digits % 10);
  }
}

TEST_CASE("JSON strings: quotes, backslash and control bytes escaped, the rest kept, appended to what is there") {
  std::string out = "x=";
  onelayer::append_json_string(out, "a\"b\\c\nd\re\tf\x01g\x1fh\x7fi\xc3\xa9");
  CHECK(out == "x=\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g\\u001fh\\u007fi\xc3\xa9\"");
  std::string empty;
  onelayer::append_json_string(empty, "");
  CHECK(empty == "\"\"");
}
