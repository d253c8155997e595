# Semantic step 2: the never-indexed policy reads the configured request-timeout header name.
import re
def edit(path, old, new, count=1):
    s = open(path).read()
    assert s.count(old) >= 1, (path, old[:60])
    s = s.replace(old, new, count)
    open(path, "w").write(s)

H = "proxy/shell/http2/h2_session.h"
C = "proxy/shell/http2/h2_session.cc"
edit(H, """  static constexpr size_t kTimeLeftNames = 2;  // x-request-timeout-ms, grpc-timeout
  struct PerMessageFields {
    std::array<uint32_t, kPerMessageNames> sent{};
    std::array<std::array<char, 20>, kTimeLeftNames> last_value{};
    std::array<uint8_t, kTimeLeftNames> last_size{};
  };
""", """  static constexpr size_t kTimeLeftNames = 2;  // the request timeout header, grpc-timeout
  struct PerMessageFields {
    std::array<uint32_t, kPerMessageNames> sent{};
    std::array<std::array<char, 20>, kTimeLeftNames> last_value{};
    std::array<uint8_t, kTimeLeftNames> last_size{};
    // The request timeout header's name (headers.request_timeout_ms of the
    // config; set_request_timeout_name()), in lower case.
    std::string request_timeout_name = HeaderNames{}.request_timeout_ms;
  };
  // The configured name of the request timeout header (a time-left field,
  // never indexed unless its value repeats). A connection keeps the name
  // it was given: a reload that renames the header reaches new connections.
  void set_request_timeout_name(std::string_view name);
""")
s = open(H).read()
if '#include "core/config/config.h"' not in s:
    s = s.replace('#include "core/h2wire/h2_header_block_extractor.h"', '#include "core/config/config.h"\n#include "core/h2wire/h2_header_block_extractor.h"', 1)
    open(H, "w").write(s)

edit(C, "// The time left (x-request-timeout-ms, grpc-timeout) is the exception that",
        "// The time left (the request timeout header, x-request-timeout-ms unless\n// configured otherwise, and grpc-timeout) is the exception that")
edit(C, "enum PerMessageName : uint8_t {\n  kXRequestTimeoutMs,", "enum PerMessageName : uint8_t {\n  kRequestTimeout,  // headers.request_timeout_ms")
edit(C, """OutgoingRule outgoing_field(std::string_view n, std::string_view value) {
  switch (n.size()) {""", """// `request_timeout`: the configured name of the request timeout header,
// in lower case (as `n` is).
OutgoingRule outgoing_field(std::string_view n, std::string_view value, std::string_view request_timeout) {
  if (n.size() == request_timeout.size() && n == request_timeout) return never_indexed(kRequestTimeout);
  switch (n.size()) {""")
edit(C, """    case 20: return is_name(n, "x-request-timeout-ms") ? never_indexed(kXRequestTimeoutMs) : kIndexed;
""", "")
edit(C, "    OutgoingRule rule = outgoing_field(name, value);",
        "    OutgoingRule rule = outgoing_field(name, value, request_timeout_name());")
edit(C, """  // Whether a field of `name`, never indexed, goes with indexing this time""",
"""  std::string_view request_timeout_name() const {
    static const std::string kDefault = HeaderNames{}.request_timeout_ms;
    return per_message_ ? std::string_view(per_message_->request_timeout_name) : std::string_view(kDefault);
  }

  // Whether a field of `name`, never indexed, goes with indexing this time""")
s = open(C).read()
s = s.replace("kXRequestTimeoutMs", "kRequestTimeout")
open(C, "w").write(s)
edit(C, "H2Session::~H2Session() {", """void H2Session::set_request_timeout_name(std::string_view name) {
  std::string& n = per_message_.request_timeout_name;
  n.assign(name);
  for (char& c : n)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
}

H2Session::~H2Session() {""")

# The connections give their session the configured name.
edit("proxy/shell/http2/h2_server_connection.cc", "  session_.leave_front_field();  // for Host (translate_h2_request)\n",
     "  session_.leave_front_field();  // for Host (translate_h2_request)\n"
     "  session_.set_request_timeout_name(w->generation()->config->headers.request_timeout_ms);\n")
edit("proxy/shell/http2/h2_client_connection.cc", "  ep_->h2.push_back(this);\n",
     "  ep_->h2.push_back(this);\n"
     "  session_.set_request_timeout_name(w->generation()->config->headers.request_timeout_ms);\n")

# The test: the policy follows the configured name.
T = "tests/unit/shell/http2/h2_session_hpack_test.cc"
edit(T, 'TEST_CASE("h2 hpack: a field off the never-indexed list enters the table once and is then found whole") {',
'''TEST_CASE("h2 hpack: the time-left rule follows the configured request timeout header name") {
  // headers.request_timeout_ms renamed: the configured name is the
  // time-left field, and x-request-timeout-ms is an ordinary field.
  EncodingClient c;
  c.session.set_request_timeout_name("X-Deadline-Ms");
  auto send = [&](const char* name, const std::string& value) {
    return field_named(c.request({{name, value}}), name);
  };
  check_seed(send("x-deadline-ms", "14999"), "14999");
  CHECK(send("x-deadline-ms", "14999").form == Form::indexed);
  check_never_indexed_by_dynamic_name(send("x-deadline-ms", "12000"), "12000");
  for (int n = 0; n < 3; ++n) {
    CAPTURE(n);
    const EncodedField f = send("x-request-timeout-ms", std::to_string(30000 - n));
    CHECK(f.form == Form::incremental);  // indexed: a new entry for each new value
    CHECK_FALSE(f.decoder_saw_never_indexed);
  }
}

TEST_CASE("h2 hpack: a field off the never-indexed list enters the table once and is then found whole") {''')
