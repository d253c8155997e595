#include "shell/io/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <array>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/http/http_headers.h"

namespace onelayer {

static LogFormat g_format = LogFormat::text;

// %* in the JSON pattern: the message as a JSON string (quotes, escapes), so
// a log line stays valid JSON whatever the message holds.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string out;
    append_json_string(out, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(out.data(), out.data() + out.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessageFlag>(); }
};

LogFormat log_format() { return g_format; }

bool setup_logging(std::string_view level, LogFormat format) {
  g_format = format;
  static char stdout_buf[64 * 1024];
  std::setvbuf(stdout, stdout_buf, _IOFBF, sizeof stdout_buf);
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") return false;
  auto logger = spdlog::stderr_logger_mt("onelayer");
  if (format == LogFormat::json) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","thread":%t,"msg":%*})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l [%t] %v");
  }
  logger->set_level(lvl);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return true;
}

namespace {

// Text values are printed bare unless they contain spaces, quotes or
// control bytes.
constexpr std::array<bool, 256> kBare = [] {
  std::array<bool, 256> t{};
  for (int c = 0x21; c < 256; ++c) t[static_cast<size_t>(c)] = c != '"' && c != 0x7f;
  return t;
}();

// Writes one line through a pointer into room made once: no capacity check
// or call per piece. `bound` must cover everything written (see
// line_bound()); done() cuts the string to what was written.
class LineWriter {
 public:
  LineWriter(std::string& out, size_t bound) : out_(out), start_(out.size()) {
    out.resize(start_ + bound);
    p_ = out.data() + start_;
  }
  void done() { out_.resize(static_cast<size_t>(p_ - out_.data())); }

  void put(char c) { *p_++ = c; }
  void put(std::string_view s) {
    if (s.empty()) return;
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void put_decimal(uint64_t v) { p_ = std::to_chars(p_, p_ + 20, v).ptr; }  // 20 digits at most
  // At most 6 bytes out per byte in, plus the quotes.
  void put_json_string(std::string_view s) {
    put('"');
    for (unsigned char c : s) {
      switch (c) {
        case '"': put("\\\""); break;
        case '\\': put("\\\\"); break;
        case '\n': put("\\n"); break;
        case '\r': put("\\r"); break;
        case '\t': put("\\t"); break;
        default:
          if (c < 0x20 || c == 0x7f) {
            static constexpr char kHex[] = "0123456789abcdef";
            const char u[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
            put(std::string_view(u, sizeof u));
          } else {
            put(static_cast<char>(c));
          }
      }
    }
    put('"');
  }
  void put_text_value(std::string_view v) {
    if (v.empty()) return put('-');
    bool bare = true;
    for (unsigned char c : v) bare &= kBare[c];
    if (bare) put(v);
    else put_json_string(v);
  }
  // "2026-11-29T17:23:00.123Z". The seconds part is formatted once per
  // second per thread; only the milliseconds change between lines.
  void put_iso_time(int64_t unix_ms) {
    thread_local int64_t cached_secs = -1;
    thread_local char cached[32];
    thread_local size_t cached_len = 0;
    int64_t secs = unix_ms / 1000;
    if (secs != cached_secs) {
      std::time_t t = static_cast<std::time_t>(secs);
      std::tm tm{};
      gmtime_r(&t, &tm);
      cached_len = std::strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
      cached_secs = secs;
    }
    int ms = static_cast<int>(unix_ms % 1000);
    if (ms < 0) ms = 0;
    put(std::string_view(cached, cached_len));
    const char frac[] = {'.', static_cast<char>('0' + ms / 100), static_cast<char>('0' + ms / 10 % 10),
                         static_cast<char>('0' + ms % 10), 'Z'};
    put(std::string_view(frac, sizeof frac));
  }
  // A non-negative duration with three decimals ("61.412"), rounded to the
  // nearest microsecond; negative values (a clock step) print as 0.000.
  void put_millis3(double ms) {
    uint64_t us = ms > 0 ? static_cast<uint64_t>(ms * 1000.0 + 0.5) : 0;
    put_decimal(us / 1000);
    const char frac[] = {'.', static_cast<char>('0' + us / 100 % 10), static_cast<char>('0' + us / 10 % 10),
                         static_cast<char>('0' + us % 10)};
    put(std::string_view(frac, sizeof frac));
  }

 private:
  std::string& out_;
  size_t start_;
  char* p_;
};

// A field's key with its separators, as each format writes it: one piece
// per key instead of three.
struct LogKey {
  std::string_view text, json;
};
#define ONELAYER_LOG_KEY(name) LogKey{" " name "=", ",\"" name "\":"}
constexpr LogKey kListenerKey = ONELAYER_LOG_KEY("listener"), kRouteKey = ONELAYER_LOG_KEY("route"),
                 kMethodKey = ONELAYER_LOG_KEY("method"), kPathKey = ONELAYER_LOG_KEY("path"),
                 kStatusKey = ONELAYER_LOG_KEY("status"), kAttemptsKey = ONELAYER_LOG_KEY("attempts"),
                 kHedgesKey = ONELAYER_LOG_KEY("hedges"),
                 kRetryReasonsKey = ONELAYER_LOG_KEY("retry_reasons"), kDeclinedKey = ONELAYER_LOG_KEY("declined"),
                 kErrorKey = ONELAYER_LOG_KEY("error"), kUpstreamKey = ONELAYER_LOG_KEY("upstream"),
                 kDurationKey = ONELAYER_LOG_KEY("duration_ms"), kBytesInKey = ONELAYER_LOG_KEY("bytes_in"),
                 kBytesOutKey = ONELAYER_LOG_KEY("bytes_out"), kProtocolKey = ONELAYER_LOG_KEY("protocol"),
                 kStreamKey = ONELAYER_LOG_KEY("stream"), kGrpcStatusKey = ONELAYER_LOG_KEY("grpc_status"),
                 kCallerKey = ONELAYER_LOG_KEY("caller");
#undef ONELAYER_LOG_KEY

// Room for a line: every string at its most escaped, the keys, numbers
// and time.
size_t line_bound(const AccessRecord& r) {
  size_t strings = r.listener.size() + r.route.size() + r.method.size() + r.path.size() + r.retry_reasons.size() +
                   r.declined.size() + r.error.size() + r.upstream_endpoints.size() + r.protocol.size() +
                   r.caller.size();
  return 6 * strings + 512;
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  LineWriter w(out, 6 * s.size() + 2);
  w.put_json_string(s);
  w.done();
}

void format_access_log(const AccessRecord& r, LogFormat format, std::string& line) {
  // Formatted by hand through one pointer: this runs once per request, and
  // fmt's format-string parsing and buffer growth cost as much as the rest
  // of the line.
  const bool json = format == LogFormat::json;
  LineWriter w(line, line_bound(r));
  auto key = [&](const LogKey& k) { w.put(json ? k.json : k.text); };
  auto str = [&](const LogKey& k, std::string_view v) {
    key(k);
    if (json) {
      w.put_json_string(v);
    } else {
      w.put_text_value(v);
    }
  };
  auto num = [&](const LogKey& k, uint64_t v) {
    key(k);
    w.put_decimal(v);
  };
  // The documented field order (docs/operations.md "Logs").
  if (json) w.put("{\"time\":\"");
  w.put_iso_time(r.unix_ms);
  if (json) w.put('"');
  str(kListenerKey, r.listener);
  str(kRouteKey, r.route);
  str(kMethodKey, r.method);
  str(kPathKey, r.path);
  num(kStatusKey, r.status < 0 ? 0 : static_cast<uint64_t>(r.status));
  num(kAttemptsKey, r.attempts);
  num(kHedgesKey, r.hedges);
  str(kRetryReasonsKey, r.retry_reasons);
  str(kDeclinedKey, r.declined);
  str(kErrorKey, r.error);
  str(kUpstreamKey, r.upstream_endpoints);
  key(kDurationKey);
  w.put_millis3(r.duration_ms);
  num(kBytesInKey, r.bytes_in);
  num(kBytesOutKey, r.bytes_out);
  str(kProtocolKey, r.protocol);
  num(kStreamKey, r.stream_id);
  if (r.grpc_status >= 0) num(kGrpcStatusKey, static_cast<uint64_t>(r.grpc_status));  // gRPC calls only
  if (!r.caller.empty()) str(kCallerKey, r.caller);  // mTLS listeners' verified callers only
  w.put(json ? "}\n" : "\n");
  w.done();
}

namespace {
constexpr size_t kAccessBatchBytes = 16 * 1024;
thread_local bool t_batching = false;
thread_local std::string t_lines;  // reused: no allocation per request
}  // namespace

void write_access_log(const AccessRecord& r) {
  if (!t_batching) t_lines.clear();
  format_access_log(r, g_format, t_lines);
  // stdout is fully buffered (setup_logging); the server flushes it a few
  // times a second and at exit, so a busy proxy makes no syscall per line,
  // and a batching worker takes stdout's lock once per loop iteration.
  if (!t_batching || t_lines.size() >= kAccessBatchBytes) hand_over_access_log();
}

void batch_access_log() { t_batching = true; }

int64_t access_log_unix_ms(std::chrono::steady_clock::time_point now) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  thread_local bool t_sampled = false;
  thread_local int64_t t_sampled_ms = 0;  // steady ms of the last sample
  thread_local int64_t t_offset_ms = 0;   // wall - steady
  const int64_t steady_ms = duration_cast<milliseconds>(now.time_since_epoch()).count();
  if (!t_sampled || steady_ms - t_sampled_ms >= 1000 || steady_ms < t_sampled_ms) {
    t_sampled = true;
    const int64_t wall_ms = duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    t_offset_ms = wall_ms - steady_ms;
    t_sampled_ms = steady_ms;
  }
  return steady_ms + t_offset_ms;
}

void hand_over_access_log() {
  if (t_lines.empty()) return;
  std::fwrite(t_lines.data(), 1, t_lines.size(), stdout);
  t_lines.clear();
}

void flush_access_log() { std::fflush(stdout); }

}  // namespace onelayer
