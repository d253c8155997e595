// Retry-After (RFC 9110 10.2.3): delay-seconds or an HTTP-date.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "core/config/config.h"

namespace onelayer {

// Any larger Retry-After is reported as this (about 31.7 years): far beyond
// every sane retry_after.max, yet safe to add to any clock's time point.
inline constexpr Millis kRetryAfterSaturation{1'000'000'000'000};

// Parses a Retry-After value: delay-seconds, IMF-fixdate, RFC 850 and asctime
// (RFC 9110 5.6.7, 10.2.3) relative to `now` (wall clock). Surrounding spaces
// and tabs are ignored; dates are case-sensitive as the grammar says.
// nullopt for garbage/negative/empty; huge values saturate at
// kRetryAfterSaturation (no overflow); dates in the past give 0ms. A date
// maps to the milliseconds from `now` to it, rounded up. RFC 850's two-digit
// year is read per 5.6.7: more than 50 years ahead of `now` means the
// previous century.
std::optional<Millis> parse_retry_after(std::string_view value,
                                        std::chrono::system_clock::time_point now);

}  // namespace onelayer
