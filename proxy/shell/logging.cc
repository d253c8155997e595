#include "shell/logging.h"

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>
#include <ctime>
#include <mutex>

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

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

// "2026-11-29T17:23:00.123Z". The seconds part is formatted once per second
// per thread; only the milliseconds change between lines.
static std::string iso_time(int64_t unix_ms) {
  thread_local int64_t cached_secs = -1;
  thread_local char cached[32];
  int64_t secs = unix_ms / 1000;
  if (secs != cached_secs) {
    std::time_t t = static_cast<std::time_t>(secs);
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(cached, sizeof cached, "%Y-%m-%dT%H:%M:%S", &tm);
    cached_secs = secs;
  }
  char out[40];
  int ms = static_cast<int>(unix_ms % 1000);
  std::snprintf(out, sizeof out, "%s.%03dZ", cached, ms < 0 ? 0 : ms);
  return out;
}

// Text values are printed bare unless they contain spaces or quotes.
static void append_text_value(std::string& out, std::string_view v) {
  if (v.empty()) {
    out += "-";
    return;
  }
  bool plain = true;
  for (unsigned char c : v)
    if (c <= 0x20 || c == '"' || c == 0x7f) plain = false;
  if (plain) {
    out.append(v);
  } else {
    append_json_string(out, v);
  }
}

void write_access_log(const AccessRecord& r) {
  // One field list for both formats, in PRODUCT.md's order.
  const std::pair<const char*, std::string_view> text_fields[] = {
      {"listener", r.listener}, {"route", r.route}, {"method", r.method}, {"path", r.path}};
  const std::pair<const char*, std::string_view> reason_fields[] = {
      {"retry_reasons", r.retry_reasons}, {"declined", r.declined}, {"error", r.error},
      {"upstream", r.upstream_endpoints}};
  const bool json = g_format == LogFormat::json;
  std::string line;
  line.reserve(256);
  std::string t = iso_time(r.unix_ms);
  auto add = [&](const char* key, std::string_view v) {
    if (json) {
      line += ",\"";
      line += key;
      line += "\":";
      append_json_string(line, v);
    } else {
      line += ' ';
      line += key;
      line += '=';
      append_text_value(line, v);
    }
  };
  line += json ? "{\"time\":\"" + t + "\"" : t;
  for (const auto& [k, v] : text_fields) add(k, v);
  auto out = std::back_inserter(line);
  if (json) {
    fmt::format_to(out, ",\"status\":{},\"attempts\":{}", r.status, r.attempts);
  } else {
    fmt::format_to(out, " status={} attempts={}", r.status, r.attempts);
  }
  for (const auto& [k, v] : reason_fields) add(k, v);
  if (json) {
    fmt::format_to(out, ",\"duration_ms\":{:.3f},\"bytes_in\":{},\"bytes_out\":{}}}\n", r.duration_ms, r.bytes_in,
                   r.bytes_out);
  } else {
    fmt::format_to(out, " duration_ms={:.3f} bytes_in={} bytes_out={}\n", r.duration_ms, r.bytes_in, r.bytes_out);
  }
  // stdout is fully buffered (setup_logging); the server flushes it a few
  // times a second and at exit, so a busy proxy makes no syscall per line.
  std::fwrite(line.data(), 1, line.size(), stdout);
}

void flush_access_log() { std::fflush(stdout); }

}  // namespace onelayer
