// Parsing and formatting of the config file's unit-bearing values:
// durations ("250ms", "1.5s"), sizes ("64KiB", "1024") and "host:port".
// Pure functions; they say only whether a text is valid, the loader words
// the error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/config/config.h"

namespace onelayer {

// A non-negative decimal number followed by a unit: ms, s, m or h
// ("250ms", "1.5s", "2m", "1h"). The result must be a whole number of
// milliseconds ("0.5ms" and "1.0005s" are rejected, as are a missing unit,
// a sign, spaces, other units and values that overflow).
std::optional<Millis> parse_duration(std::string_view text);

// The shortest exact spelling in the largest unit that divides the value:
// 3600000ms -> "1h", 90000ms -> "90s", 1500ms -> "1500ms", 0 -> "0ms".
// parse_duration(format_duration(d)) == d for every d >= 0.
std::string format_duration(Millis d);

// Bytes: a plain integer ("1024") or a decimal number with a unit: B, KB/kB,
// MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024). The
// result must be a whole number of bytes that fits in 64 bits.
std::optional<uint64_t> parse_size(std::string_view text);

// "64KiB" when the value is a whole number of KiB/MiB/GiB/TiB, else the
// plain byte count. parse_size(format_size(n)) == n.
std::string format_size(uint64_t bytes);

// The shortest text that reads back as exactly `v` ("0.5", "1e+21"); NaN,
// +Inf and -Inf as "NaN", "+Inf", "-Inf" (the Prometheus spelling).
std::string format_double(double v);

// "127.0.0.1:80", "[::1]:80" or "name.svc:8080". An IPv6 literal must be in
// brackets (stored without them); the port is required and may be 0 (the
// loader decides where 0 is allowed).
std::optional<HostPort> parse_host_port(std::string_view text);

}  // namespace onelayer
