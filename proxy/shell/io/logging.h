// Process logs (spdlog, stderr) and the access log (one line per downstream
// request on stdout, text or JSON).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace onelayer {

enum class LogFormat { text, json };

// Returns false (and leaves defaults) for an unknown level name.
bool setup_logging(std::string_view level, LogFormat format);
LogFormat log_format();

struct AccessRecord {
  std::string_view listener, route, method, path, upstream_endpoints, retry_reasons, declined, error;
  std::string_view protocol = "http1";  // what the client spoke: http1 or h2
  uint32_t stream_id = 0;               // the HTTP/2 stream (0 on HTTP/1)
  int status = 0;
  uint32_t attempts = 0;
  uint32_t hedges = 0;  // hedged attempts sent
  double duration_ms = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  int64_t unix_ms = 0;
  int grpc_status = -1;  // a gRPC call's grpc-status as the caller got it; <0: not a gRPC call (no field)
  std::string_view caller;  // the client's verified identity (mTLS); "": no field
};
// Appends one access-log line (newline included) in `format` to `out`.
void format_access_log(const AccessRecord& r, LogFormat format, std::string& out);
// The wall-clock time (ms since the epoch) for an access-log line, from a
// steady-clock reading: this thread's offset between the two clocks, taken
// again once a second (a wall-clock step shows within a second), so a
// request costs no second clock read.
int64_t access_log_unix_ms(std::chrono::steady_clock::time_point now);
// Formats the line into this thread's batch (see batch_access_log()) or,
// on a thread that does not batch, straight into stdout's buffer.
void write_access_log(const AccessRecord& r);
// From now on this thread's lines gather in a batch of its own, handed to
// stdout by hand_over_access_log() (or when the batch passes 16 KiB): one
// locked fwrite for many lines. A worker turns it on and hands over at the
// end of every loop iteration and when it stops.
void batch_access_log();
void hand_over_access_log();
void flush_access_log();  // stdout's buffer to the file (the server's thread)

// JSON string escaping for log lines.
void append_json_string(std::string& out, std::string_view s);

}  // namespace onelayer
