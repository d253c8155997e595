// The admin listener's bearer token check (docs/security.md): whether an
// `Authorization` header value carries the configured token, compared in
// time that does not depend on where the first differing byte is.
#pragma once

#include <string_view>

namespace onelayer {

// Equal bytes and length, reading every byte of both (no early exit), so the
// time taken tells an attacker nothing about how much of a guess was right.
bool constant_time_equal(std::string_view a, std::string_view b);

// `authorization` is a header value such as "Bearer s3cret": the scheme
// (any case), one or more spaces, the token, optional trailing blanks.
// False for any other scheme, a missing token, or an empty `token`.
bool bearer_token_matches(std::string_view authorization, std::string_view token);

}  // namespace onelayer
