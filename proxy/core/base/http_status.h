// The standard reason phrase of a status code (RFC 9110 section 15), for the
// responses onelayer, its admin listener and the demo upstream make, and for
// an upstream response whose own phrase is empty or unclean.
#pragma once

namespace onelayer {

// "Not Found" for 404; a code without a phrase here gets its class's
// ("Informational", "OK", "Redirect", "Client Error", "Server Error").
const char* status_text(int status);

}  // namespace onelayer
