#include "core/config/config_loader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "core/base/http_token.h"
#include "core/callers/caller_patterns.h"
#include "core/config/service_name.h"
#include "core/config/units.h"

namespace onelayer {
namespace {

const char* protocol_name(UpstreamProtocol p);  // as written in the file (the YAML writer below)

// Longest duration any setting may have: keeps deadline arithmetic
// (now + timeout, in ms or ns) far from overflow.
constexpr Millis kMaxDuration{720LL * 3'600'000};
constexpr uint64_t kMiB = 1024 * 1024;

// ---------------------------------------------------------------- text checks

bool is_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
  });
}

bool is_hostname(std::string_view s) {
  if (s.empty() || s.front() == '.' || s.front() == '-' || s.find("..") != std::string_view::npos)
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.';
  });
}

bool is_bracketed_ipv6(std::string_view s) {
  if (s.size() < 4 || s.front() != '[' || s.back() != ']') return false;
  s = s.substr(1, s.size() - 2);
  return s.find(':') != std::string_view::npos && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                  c == ':' || c == '.';
         });
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string to_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ------------------------------------------------------------ document scan

// Notes where each document starts and whether it holds anything.
class DocumentStarts : public YAML::EventHandler {
 public:
  struct Document {
    YAML::Mark start;
    bool has_content = false;
  };
  std::vector<Document> docs;

  void OnDocumentStart(const YAML::Mark& mark) override { docs.push_back({mark, false}); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content(); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    content();
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    content();
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    content();
  }
  void OnMapEnd() override {}

 private:
  void content() {
    if (!docs.empty()) docs.back().has_content = true;
  }
};

// What the stream holds beyond its first document. yaml-cpp 0.7's LoadAll()
// never returns on a stray top-level ',' (jbeder/yaml-cpp#1040: the parser
// emits a null document without consuming the token, forever, allocating
// each time), so documents are counted here with a bounded loop instead.
// Empty documents after the first ("---" at the end) are harmless.
enum class StreamShape { one_document, several_documents, stuck };

StreamShape scan_documents(const std::string& text, YAML::Mark& where) {
  constexpr int kMaxDocuments = 16;
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts scan;
  for (int i = 0; i < kMaxDocuments && parser.HandleNextDocument(scan); ++i) {
    const auto& docs = scan.docs;
    size_t n = docs.size();
    // A document starting where the previous one did means no token was used.
    if (n >= 2 && docs[n - 1].start.pos == docs[n - 2].start.pos) {
      where = docs[n - 1].start;
      return StreamShape::stuck;
    }
    if (n >= 2 && docs[n - 1].has_content) {
      where = docs[n - 1].start;
      return StreamShape::several_documents;
    }
  }
  return StreamShape::one_document;
}

// ---------------------------------------------------------------- the loader

// A node being read, with the place to point at and its key path.
struct At {
  YAML::Node node;
  YAML::Mark mark;
  std::string path;
};

std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

const char* kind_of(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a scalar";
    default: return "nothing";
  }
}

class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  LoadResult load(std::string_view text);

 private:
  using Handler = std::function<void(const At&)>;
  struct Field {
    std::string_view key;
    Handler read;
    bool required = false;
  };

  // A listen address, checked against the others once all are read.
  struct Address {
    HostPort hp;
    At at;
  };
  // A route's upstream name, resolved once all upstreams are read.
  struct UpstreamRef {
    size_t listener;
    size_t route;
    At at;
  };

  void error(const At& at, std::string message);
  void read_map(const At& at, std::initializer_list<Field> fields);
  void read_list(const At& at, const Handler& item, bool allow_empty);

  std::optional<std::string> read_string(const At& at);
  bool read_name(const At& at, std::string& out);
  bool read_token(const At& at, std::string& out, const char* what);
  bool read_bool(const At& at, bool& out);
  bool read_uint(const At& at, uint64_t lo, uint64_t hi, uint64_t& out);
  template <typename T>
  bool read_uint_as(const At& at, uint64_t lo, uint64_t hi, T& out);
  bool read_double(const At& at, double lo, double hi, double& out);
  bool read_duration(const At& at, bool allow_zero, Millis& out);
  // One of the names in `choices`; otherwise "must be one of a, b, c".
  template <typename E>
  void read_choice(const At& at, std::initializer_list<std::pair<std::string_view, E>> choices, E& out);
  bool read_size(const At& at, uint64_t lo, uint64_t hi, uint64_t& out);
  bool read_host_port(const At& at, bool allow_port_zero, HostPort& out);

  void read_root(const At& at);
  void read_headers(const At& at, HeaderNames& h);
  using NameIndex = std::map<std::string, std::string>;  // name -> path of its first use
  bool read_unique_name(const At& at, std::string& out, NameIndex& names, const char* what);
  void read_listener(const At& at, size_t index, Listener& l, NameIndex& names);
  void read_limits(const At& at, Limits& limits);
  void read_route(const At& at, size_t listener, size_t index, Route& r, NameIndex& names);
  void read_match(const At& at, RouteMatch& m);
  void read_caller_patterns(const At& at, std::vector<std::string>& out);
  void read_retry(const At& at, RetryPolicy& p);
  // A duration, or p50|p90|p95|p99 of an upstream's recent latency.
  void read_latency_threshold(const At& at, LatencyThreshold& out);
  void read_fault(const At& at, FaultConfig& f);
  void read_retry_on(const At& at, RetryOn& on);
  void read_backoff(const At& at, Backoff& b);
  void read_upstream(const At& at, Upstream& u, NameIndex& names);
  void read_outlier_detection(const At& at, OutlierDetectionConfig& od);
  void read_health_check(const At& at, HealthCheckConfig& hc);
  void read_upgrades(const At& at, std::vector<std::string>& out);
  void read_listener_protocols(const At& at, ListenerProtocols& out);
  void read_listener_tls(const At& at, ListenerTls& tls);
  // `h2_at`: where `alpn` names h2 (allowed with protocol h2 only, which
  // check_protocol decides once the protocol is known).
  void read_upstream_tls(const At& at, UpstreamTls& tls, std::optional<At>& h2_at);
  bool read_file_name(const At& at, std::string& out);
  void check_protocol(const std::optional<At>& at, const Upstream& u, const std::optional<At>& alpn_h2_at);
  void check_header_names(const At& at, const HeaderNames& h);
  void check_addresses();
  void resolve_upstreams();
  // Transparent listeners: where their keys are used elsewhere, and the
  // fallback routes added at the end (docs/transparent.md).
  void check_transparent();
  void add_transparent_fallbacks();
  void read_fleet(const At& at, FleetConfig& f);
  void check_fleet();

  std::string file_;
  std::vector<ConfigError> errors_;
  Config config_;
  std::vector<Address> addresses_;
  std::vector<UpstreamRef> upstream_refs_;
  // Keys that need a transparent listener: where, and in which listener.
  struct TransparentKey {
    size_t listener;
    At at;
  };
  std::vector<TransparentKey> transparent_keys_;
  std::vector<At> fleet_uses_;  // retry budgets with scope fleet and listeners with fleet_service
  std::map<std::string, std::string> fleet_services_;  // service -> the upstream whose budget it is
};

void Loader::error(const At& at, std::string message) {
  ConfigError e;
  e.file = file_;
  // yaml-cpp marks are 0-based; a node without a mark has line -1.
  e.line = at.mark.line >= 0 ? at.mark.line + 1 : 1;
  e.column = at.mark.column >= 0 ? at.mark.column + 1 : 1;
  e.path = at.path;
  e.message = std::move(message);
  errors_.push_back(std::move(e));
}

// Reads a map whose keys must all be in `fields`. A null value (an empty
// `retry:`) reads as an empty map, so every default applies.
void Loader::read_map(const At& at, std::initializer_list<Field> fields) {
  if (!at.node.IsNull() && !at.node.IsMap()) {
    error(at, std::string("expected a map, found ") + kind_of(at.node));
    return;
  }
  std::vector<std::string> seen;
  if (at.node.IsMap()) {
    for (auto it = at.node.begin(); it != at.node.end(); ++it) {
      YAML::Node key = it->first;  // copies: `it->` yields a temporary proxy
      YAML::Node value = it->second;
      At key_at{key, key.Mark(), at.path};
      if (!key.IsScalar()) {
        error(key_at, std::string("expected a key name, found ") + kind_of(key));
        continue;
      }
      const std::string& name = key.Scalar();
      key_at.path = child_path(at.path, name);
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        error(key_at, "duplicate key");
        continue;
      }
      seen.push_back(name);
      const Field* field = nullptr;
      for (const Field& f : fields) {
        if (f.key == name) field = &f;
      }
      if (field == nullptr) {
        std::string_view best;
        size_t best_distance = 3;  // suggest only close spellings
        for (const Field& f : fields) {
          size_t d = edit_distance(name, f.key);
          if (d < best_distance) {
            best_distance = d;
            best = f.key;
          }
        }
        error(key_at, best.empty() ? "unknown key"
                                   : "unknown key (did you mean " + quoted(best) + "?)");
        continue;
      }
      // A null value's own mark is the next token; point at its key instead.
      YAML::Mark mark = value.IsNull() ? key.Mark() : value.Mark();
      field->read(At{value, mark, key_at.path});
    }
  }
  for (const Field& f : fields) {
    if (f.required && std::find(seen.begin(), seen.end(), f.key) == seen.end()) {
      error(At{at.node, at.mark, child_path(at.path, f.key)}, "is required");
    }
  }
}

void Loader::read_list(const At& at, const Handler& item, bool allow_empty) {
  if (!at.node.IsSequence()) {
    error(at, std::string("expected a list, found ") + kind_of(at.node));
    return;
  }
  if (at.node.size() == 0 && !allow_empty) {
    error(at, "must not be empty");
    return;
  }
  for (size_t i = 0; i < at.node.size(); ++i) {
    YAML::Node n = at.node[i];
    YAML::Mark mark = n.Mark();
    if (n.IsNull() || mark.line < 0) mark = at.mark;
    item(At{n, mark, index_path(at.path, i)});
  }
}

template <typename E>
void Loader::read_choice(const At& at, std::initializer_list<std::pair<std::string_view, E>> choices, E& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return;
  std::string names;
  for (const auto& [name, value] : choices) {
    if (*s == name) {
      out = value;
      return;
    }
    names += names.empty() ? "" : ", ";
    names += name;
  }
  error(at, "must be one of " + names);
}

std::optional<std::string> Loader::read_string(const At& at) {
  if (at.node.IsNull()) {
    error(at, "missing value");
    return std::nullopt;
  }
  if (!at.node.IsScalar()) {
    error(at, std::string("expected a scalar value, found ") + kind_of(at.node));
    return std::nullopt;
  }
  return at.node.Scalar();
}

bool Loader::read_name(const At& at, std::string& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  if (!is_name(*s)) {
    error(at, "must be a name of letters, digits, '-', '_' or '.'");
    return false;
  }
  out = *s;
  return true;
}

bool Loader::read_token(const At& at, std::string& out, const char* what) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  if (!is_token(*s)) {
    error(at, std::string("must be ") + what + " (an HTTP token)");
    return false;
  }
  out = *s;
  return true;
}

bool Loader::read_bool(const At& at, bool& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  if (*s == "true" || *s == "True" || *s == "TRUE") {
    out = true;
  } else if (*s == "false" || *s == "False" || *s == "FALSE") {
    out = false;
  } else {
    error(at, "expected true or false");
    return false;
  }
  return true;
}

bool Loader::read_uint(const At& at, uint64_t lo, uint64_t hi, uint64_t& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  uint64_t v = 0;
  const char* end = s->data() + s->size();
  auto res = std::from_chars(s->data(), end, v);
  bool digits_only = !s->empty() && std::all_of(s->begin(), s->end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (!digits_only || res.ec == std::errc::invalid_argument || res.ptr != end) {
    error(at, "expected a whole number");
    return false;
  }
  if (res.ec == std::errc::result_out_of_range || v < lo || v > hi) {
    error(at, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return false;
  }
  out = v;
  return true;
}

template <typename T>
bool Loader::read_uint_as(const At& at, uint64_t lo, uint64_t hi, T& out) {
  uint64_t v = 0;
  if (!read_uint(at, lo, hi, v)) return false;
  out = static_cast<T>(v);
  return true;
}

bool Loader::read_double(const At& at, double lo, double hi, double& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  double v = 0;
  const char* end = s->data() + s->size();
  auto res = std::from_chars(s->data(), end, v);
  if (s->empty() || res.ec != std::errc() || res.ptr != end || !std::isfinite(v)) {
    error(at, "expected a number");
    return false;
  }
  if (v < lo || v > hi) {
    error(at, "must be between " + format_double(lo) + " and " + format_double(hi));
    return false;
  }
  out = v;
  return true;
}

bool Loader::read_duration(const At& at, bool allow_zero, Millis& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  std::optional<Millis> d = parse_duration(*s);
  if (!d) {
    error(at, "invalid duration " + quoted(*s) +
                  " (expected a number and a unit: ms, s, m or h, e.g. 250ms, 1.5s; whole ms)");
    return false;
  }
  if (!allow_zero && d->count() == 0) {
    error(at, "must be greater than 0");
    return false;
  }
  if (*d > kMaxDuration) {
    error(at, "must be at most " + format_duration(kMaxDuration));
    return false;
  }
  out = *d;
  return true;
}

bool Loader::read_size(const At& at, uint64_t lo, uint64_t hi, uint64_t& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  std::optional<uint64_t> v = parse_size(*s);
  if (!v) {
    error(at, "invalid size " + quoted(*s) +
                  " (expected bytes, or a number and a unit: KiB, MiB, GiB, KB, MB, GB)");
    return false;
  }
  if (*v < lo || *v > hi) {
    error(at, "must be between " + format_size(lo) + " and " + format_size(hi));
    return false;
  }
  out = *v;
  return true;
}

bool Loader::read_host_port(const At& at, bool allow_port_zero, HostPort& out) {
  if (at.node.IsSequence()) {
    // `listen: [::1]:80` unquoted is a YAML flow list; say how to fix it.
    error(at, "expected host:port, found a list (quote IPv6 addresses: \"[::1]:80\")");
    return false;
  }
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  std::optional<HostPort> hp = parse_host_port(*s);
  if (!hp) {
    error(at, "invalid address " + quoted(*s) +
                  " (expected host:port, e.g. 127.0.0.1:8080, \"[::1]:8080\" or name.svc:8080)");
    return false;
  }
  if (hp->port == 0 && !allow_port_zero) {
    error(at, "port must be between 1 and 65535");
    return false;
  }
  out = *hp;
  return true;
}

// ------------------------------------------------------------------ sections

void Loader::read_root(const At& at) {
  if (!at.node.IsMap()) {
    error(at, std::string("expected a map of settings at the top level, found ") +
                  kind_of(at.node));
    return;
  }
  bool layer_id_set = false;
  NameIndex listener_names;
  NameIndex upstream_names;
  read_map(at, {
      {"layer_id",
       [&](const At& a) {
         layer_id_set = read_token(a, config_.layer_id, "a layer name");
       }},
      {"admin",
       [&](const At& a) {
         read_map(a, {{"listen",
                       [&](const At& l) {
                         if (read_host_port(l, true, config_.admin_listen))
                           addresses_.push_back({config_.admin_listen, l});
                       }},
                      {"token_file", [&](const At& t) { read_file_name(t, config_.admin_token_file); }},
                      {"allow_remote_mutations",
                       [&](const At& r) { read_bool(r, config_.admin_allow_remote_mutations); }}});
       }},
      {"workers", [&](const At& a) { read_uint_as(a, 1, 64, config_.workers); }},
      {"drain_timeout", [&](const At& a) { read_duration(a, true, config_.drain_timeout); }},
      {"propagate_baggage", [&](const At& a) { read_bool(a, config_.propagate_baggage); }},
      {"via", [&](const At& a) { read_bool(a, config_.via); }},
      {"x_forwarded_for", [&](const At& a) { read_bool(a, config_.x_forwarded_for); }},
      {"headers", [&](const At& a) { read_headers(a, config_.headers); }},
      {"fleet",
       [&](const At& a) {
         config_.fleet.emplace();
         read_fleet(a, *config_.fleet);
       }},
      {"listeners",
       [&](const At& a) {
         read_list(
             a,
             [&](const At& item) {
               size_t index = config_.listeners.size();
               Listener& l = config_.listeners.emplace_back();
               read_listener(item, index, l, listener_names);
             },
             false);
       },
       true},
      {"upstreams",
       [&](const At& a) {
         read_list(
             a,
             [&](const At& item) {
               Upstream& u = config_.upstreams.emplace_back();
               read_upstream(item, u, upstream_names);
             },
             true);
       }},
  });
  if (!layer_id_set) config_.layer_id = default_layer_id();
}

void Loader::read_headers(const At& at, HeaderNames& h) {
  auto header = [&](std::string& out) {
    return [&](const At& a) {
      if (read_token(a, out, "a header name")) out = to_lower(out);
    };
  };
  read_map(at, {{"retry_owner", header(h.retry_owner)},
                {"retry_attempt", header(h.retry_attempt)},
                {"request_timeout_ms", header(h.request_timeout_ms)},
                {"retry_exhausted", header(h.retry_exhausted)},
                {"baggage_member", header(h.baggage_member)}});
  check_header_names(at, h);
}

void Loader::check_header_names(const At& at, const HeaderNames& h) {
  // The four request/response headers must differ, or one would overwrite
  // another on the wire.
  const std::pair<const char*, const std::string*> names[] = {
      {"retry_owner", &h.retry_owner},
      {"retry_attempt", &h.retry_attempt},
      {"request_timeout_ms", &h.request_timeout_ms},
      {"retry_exhausted", &h.retry_exhausted}};
  for (size_t i = 0; i < std::size(names); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (*names[i].second == *names[j].second) {
        error(at, quoted(names[i].first) + " and " + quoted(names[j].first) +
                      " name the same header " + quoted(*names[i].second));
      }
    }
  }
}

bool Loader::read_unique_name(const At& at, std::string& out, NameIndex& names,
                              const char* what) {
  if (!read_name(at, out)) return false;
  auto [it, fresh] = names.emplace(out, at.path);
  if (!fresh) {
    error(at, std::string("duplicate ") + what + " name " + quoted(out) + " (also " + it->second +
                  ")");
  }
  return fresh;
}

void Loader::read_listener(const At& at, size_t index, Listener& l, NameIndex& names) {
  NameIndex route_names;
  std::optional<At> callers_at, caller_header_at;
  read_map(at, {
      {"name", [&](const At& a) { read_unique_name(a, l.name, names, "listener"); }, true},
      {"listen",
       [&](const At& a) {
         if (read_host_port(a, true, l.listen)) addresses_.push_back({l.listen, a});
       },
       true},
      {"limits", [&](const At& a) { read_limits(a, l.limits); }},
      {"max_concurrent_requests",
       [&](const At& a) { read_uint_as(a, 0, 10'000'000, l.max_concurrent_requests); }},
      {"headers_with_underscores",
       [&](const At& a) {
         read_choice(a,
                     {{"drop", UnderscoreHeaders::drop}, {"reject", UnderscoreHeaders::reject},
                      {"allow", UnderscoreHeaders::allow}},
                     l.headers_with_underscores);
       }},
      {"via",
       [&](const At& a) {
         bool v = true;
         if (read_bool(a, v)) l.via = v;
       }},
      {"x_forwarded_for",
       [&](const At& a) {
         bool v = true;
         if (read_bool(a, v)) l.x_forwarded_for = v;
       }},
      {"access_log", [&](const At& a) { read_bool(a, l.access_log); }},
      {"fleet_service",
       [&](const At& a) {
         std::optional<std::string> v = read_string(a);
         if (!v) return;
         if (!fleet::valid_service_name(*v)) {
           error(a, "invalid service name " + quoted(*v) + " (1-64 of letters, digits, '.', '_', '-')");
           return;
         }
         l.fleet_service = *v;
         fleet_uses_.push_back(a);
       }},
      {"upgrades", [&](const At& a) { read_upgrades(a, l.upgrades); }},
      {"protocols", [&](const At& a) { read_listener_protocols(a, l.protocols); }},
      {"mode",
       [&](const At& a) {
         read_choice(a, {{"proxy", ListenerMode::proxy}, {"transparent", ListenerMode::transparent}}, l.mode);
       }},
      {"detect_timeout",
       [&](const At& a) {
         if (read_duration(a, false, l.detect_timeout)) transparent_keys_.push_back({index, a});
       }},
      {"tls",
       [&](const At& a) {
         l.tls.emplace();
         read_listener_tls(a, *l.tls);
       }},
      {"allowed_callers",
       [&](const At& a) {
         read_caller_patterns(a, l.allowed_callers);
         callers_at = a;
       }},
      {"caller_header",
       [&](const At& a) {
         caller_header_at = a;
         if (!read_token(a, l.caller_header, "a header name")) return;
         l.caller_header = to_lower(l.caller_header);
         // Its copies from the client are removed: never a field that
         // frames or routes the message, or one onelayer writes itself.
         static const char* const kReserved[] = {
             "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection",
             "te", "trailer", "upgrade", "expect", "via", "x-forwarded-for", "x-forwarded-proto", "baggage",
             "x-retry-owner", "x-retry-attempt", "x-request-timeout-ms", "x-retry-exhausted", "x-onelayer-error"};
         for (const char* r : kReserved) {
           if (l.caller_header == r) error(a, quoted(l.caller_header) + " is a header HTTP or onelayer itself uses");
         }
       }},
      {"routes",
       [&](const At& a) {
         read_list(
             a,
             [&](const At& item) {
               size_t route_index = l.routes.size();
               Route& r = l.routes.emplace_back();
               read_route(item, index, route_index, r, route_names);
             },
             false);
       },
       true},
  });
  // Identities come only from client certificates checked against a CA.
  if (!l.tls || l.tls->client_ca_file.empty()) {
    const char* why = " needs tls.client_ca_file (caller identities come from verified client certificates)";
    if (callers_at && !l.allowed_callers.empty()) error(*callers_at, std::string("allowed_callers") + why);
    if (caller_header_at && !l.caller_header.empty()) error(*caller_header_at, std::string("caller_header") + why);
    for (const Route& r : l.routes) {
      if (!r.match.callers.empty()) error(at, "route " + quoted(r.name) + ": match.callers" + why);
    }
  }
}

void Loader::read_caller_patterns(const At& at, std::vector<std::string>& out) {
  read_list(
      at,
      [&](const At& item) {
        std::optional<std::string> s = read_string(item);
        if (!s) return;
        if (std::string problem = caller_pattern_problem(*s); !problem.empty()) {
          error(item, problem);
          return;
        }
        if (std::find(out.begin(), out.end(), *s) == out.end()) out.push_back(*s);
      },
      false);
}

void Loader::read_limits(const At& at, Limits& limits) {
  read_map(at, {
      {"max_header_bytes",
       [&](const At& a) { read_size(a, 1, kMiB, limits.max_header_bytes); }},
      {"max_body_bytes",
       [&](const At& a) {
         read_size(a, 0, std::numeric_limits<uint64_t>::max(), limits.max_body_bytes);
       }},
      {"header_timeout", [&](const At& a) { read_duration(a, false, limits.header_timeout); }},
      {"idle_timeout", [&](const At& a) { read_duration(a, false, limits.idle_timeout); }},
      {"max_connections",
       [&](const At& a) { read_uint_as(a, 1, 10'000'000, limits.max_connections); }},
      {"max_concurrent_streams",
       [&](const At& a) { read_uint_as(a, 1, 10'000, limits.max_concurrent_streams); }},
  });
}

void Loader::read_route(const At& at, size_t listener, size_t index, Route& r,
                        NameIndex& names) {
  read_map(at, {
      {"name", [&](const At& a) { read_unique_name(a, r.name, names, "route"); }, true},
      {"match",
       [&](const At& a) {
         read_match(a, r.match);
         if (r.match.destination || r.match.destination_port != 0) transparent_keys_.push_back({listener, a});
       }},
      {"upstream",
       [&](const At& a) {
         if (read_name(a, r.upstream)) upstream_refs_.push_back({listener, index, a});
       },
       true},
      {"timeout", [&](const At& a) { read_duration(a, false, r.timeout); }},
      {"inner_hops",
       [&](const At& a) {
         read_choice(a, {{"forbid", InnerHops::forbid}, {"strip", InnerHops::strip}, {"pass", InnerHops::pass}},
                     r.inner_hops);
       }},
      {"retry",
       [&](const At& a) {
         r.has_retry = true;
         r.retry.max_attempts = 3;  // the default once a route asks for retries
         read_retry(a, r.retry);
       }},
      {"fault", [&](const At& a) { read_fault(a, r.fault); }},
  });
}

void Loader::read_fault(const At& at, FaultConfig& f) {
  f.enabled = true;
  read_map(at, {
      {"abort",
       [&](const At& a) {
         f.abort_percent = 100;
         read_map(a, {
                         {"status", [&](const At& x) { read_uint_as(x, 200, 599, f.abort_status); }, true},
                         {"percent", [&](const At& x) { read_double(x, 0, 100, f.abort_percent); }},
                     });
       }},
      {"delay",
       [&](const At& a) {
         f.delay_percent = 100;
         read_map(a, {
                         {"duration", [&](const At& x) { read_duration(x, false, f.delay); }, true},
                         {"percent", [&](const At& x) { read_double(x, 0, 100, f.delay_percent); }},
                     });
       }},
      {"grpc_status", [&](const At& a) { read_uint_as(a, 1, 16, f.grpc_status); }},
  });
  if (f.grpc_status >= 0 && f.abort_status == 0)
    error(at, "grpc_status is what an abort answers gRPC calls with: it needs an abort block (its percent says how often)");
}

void Loader::read_match(const At& at, RouteMatch& m) {
  read_map(at, {
      {"host",
       [&](const At& a) {
         std::optional<std::string> s = read_string(a);
         if (!s) return;
         std::string_view h = *s;
         bool wildcard = h.size() > 2 && h.substr(0, 2) == "*.";
         bool ok = h.empty() || (wildcard && is_hostname(h.substr(2))) || is_hostname(h) ||
                   is_bracketed_ipv6(h);
         if (!ok) {
           error(a, "must be a host name or \"*.suffix\", without a port");
           return;
         }
         m.host = to_lower(h);
       }},
      {"path_prefix",
       [&](const At& a) {
         std::optional<std::string> s = read_string(a);
         if (!s) return;
         if (s->empty() || s->front() != '/') {
           error(a, "must start with \"/\"");
           return;
         }
         bool clean = std::all_of(s->begin(), s->end(), [](char c) {
           return c > ' ' && c < 0x7f && c != '?' && c != '#';
         });
         if (!clean) {
           error(a, "must be a path without spaces, '?' or '#'");
           return;
         }
         m.path_prefix = *s;
       }},
      {"methods",
       [&](const At& a) {
         read_list(
             a,
             [&](const At& item) {
               std::string method;
               if (!read_token(item, method, "a method name")) return;
               if (method != to_upper(method)) {
                 error(item, "must be upper case (" + quoted(to_upper(method)) + ")");
                 return;
               }
               if (std::find(m.methods.begin(), m.methods.end(), method) == m.methods.end())
                 m.methods.push_back(method);
             },
             false);
       }},
      {"destination",
       [&](const At& a) {
         std::optional<std::string> s = read_string(a);
         if (!s) return;
         std::string why;
         m.destination = parse_cidr(*s, &why);
         if (!m.destination) error(a, why);
       }},
      {"destination_port", [&](const At& a) { read_uint_as(a, 1, 65535, m.destination_port); }},
      {"callers", [&](const At& a) { read_caller_patterns(a, m.callers); }},
  });
}

void Loader::read_retry(const At& at, RetryPolicy& p) {
  read_map(at, {
      {"max_attempts", [&](const At& a) { read_uint_as(a, 1, 10, p.max_attempts); }},
      {"per_try_timeout",
       [&](const At& a) {
         Millis d{};
         if (read_duration(a, false, d)) p.per_try_timeout = d;
       }},
      {"retry_on", [&](const At& a) { read_retry_on(a, p.retry_on); }},
      {"backoff", [&](const At& a) { read_backoff(a, p.backoff); }},
      {"retry_after",
       [&](const At& a) {
         read_map(a, {
                         {"honor", [&](const At& x) { read_bool(x, p.retry_after.honor); }},
                         {"max",
                          [&](const At& x) { read_duration(x, true, p.retry_after.max); }},
                     });
       }},
      {"idempotency_key",
       [&](const At& a) {
         // `idempotency_key:` (null) or "" both mean: no header makes POST retryable.
         if (a.node.IsNull()) {
           p.idempotency_key.clear();
           return;
         }
         std::optional<std::string> s = read_string(a);
         if (!s) return;
         if (!s->empty() && !is_token(*s)) {
           error(a, "must be a header name (an HTTP token) or \"\"");
           return;
         }
         p.idempotency_key = *s;
       }},
      {"buffer_limit", [&](const At& a) { read_size(a, 0, 1024 * kMiB, p.buffer_limit); }},
      {"idempotent", [&](const At& a) { read_bool(a, p.idempotent); }},
      {"hedge",
       [&](const At& a) {
         if (a.node.IsNull()) {  // `hedge: ~` (as GET /config writes the default): off
           p.hedge = HedgeConfig{};
           return;
         }
         p.hedge.enabled = true;
         read_map(a, {
                         {"after", [&](const At& x) { read_latency_threshold(x, p.hedge.after); }},
                         {"max", [&](const At& x) { read_uint_as(x, 1, 9, p.hedge.max); }},
                     });
       }},
      {"min_time_left",
       [&](const At& a) {
         if (a.node.IsNull()) {  // off
           p.min_time_left.reset();
           return;
         }
         LatencyThreshold t;
         read_latency_threshold(a, t);
         p.min_time_left = t;
       }},
  });
  if (p.hedge.enabled && p.max_attempts < 2)
    error(at, "hedge: a hedge is an attempt counted against max_attempts, which must then be at least 2");
}

void Loader::read_latency_threshold(const At& at, LatencyThreshold& out) {
  if (at.node.IsScalar() && parse_latency_percentile(at.node.Scalar(), out)) return;
  if (at.node.IsScalar() && !at.node.Scalar().empty() && at.node.Scalar()[0] == 'p') {
    error(at, "invalid percentile " + quoted(at.node.Scalar()) + " (expected p50, p90, p95 or p99, or a duration)");
    return;
  }
  out.percentile = 0;
  read_duration(at, false, out.fixed);
}

void Loader::read_retry_on(const At& at, RetryOn& on) {
  // A given list replaces the default one entirely.
  on.connect_failure = on.reset = on.timeout = false;
  on.statuses.clear();
  on.grpc_statuses.clear();
  read_list(
      at,
      [&](const At& item) {
        std::optional<std::string> s = read_string(item);
        if (!s) return;
        if (*s == "connect-failure") {
          on.connect_failure = true;
        } else if (*s == "reset") {
          on.reset = true;
        } else if (*s == "timeout") {
          on.timeout = true;
        } else if (!s->empty() && std::all_of(s->begin(), s->end(), [](char c) {
                     return c >= '0' && c <= '9';
                   })) {
          int code = s->size() <= 3 ? std::stoi(*s) : 0;
          if (code < 100 || code > 599) {
            error(item, "status code must be between 100 and 599");
          } else if (!on.has_status(code)) {
            on.statuses.push_back(code);
          }
        } else if (std::optional<GrpcStatus> g = grpc_status_from_name(*s); g && is_retry_on_grpc_status(*g)) {
          if (!on.has_grpc_status(*g)) on.grpc_statuses.push_back(*g);
        } else {
          error(item,
                "must be connect-failure, reset, timeout, a status code (100-599) or a gRPC status "
                "(cancelled, deadline-exceeded, internal, resource-exhausted, unavailable)");
        }
      },
      true);
}

void Loader::read_backoff(const At& at, Backoff& b) {
  std::optional<At> base_at;
  std::optional<At> cap_at;
  bool base_ok = true;
  bool cap_ok = true;
  read_map(at, {
      {"base",
       [&](const At& a) {
         base_ok = read_duration(a, false, b.base);
         base_at = a;
       }},
      {"cap",
       [&](const At& a) {
         cap_ok = read_duration(a, false, b.cap);
         cap_at = a;
       }},
      {"jitter",
       [&](const At& a) {
         read_choice(a, {{"full", Jitter::full}, {"equal", Jitter::equal},
                         {"decorrelated", Jitter::decorrelated}, {"none", Jitter::none}},
                     b.jitter);
       }},
  });
  if (!base_ok || !cap_ok || b.cap >= b.base) return;
  // Point at whichever of the two the file wrote (cap when both are given).
  if (cap_at) {
    error(*cap_at, "must be >= base (" + format_duration(b.base) + ")");
  } else if (base_at) {
    error(*base_at, "must be <= cap (" + format_duration(b.cap) + ")");
  }
}

void Loader::read_upstream(const At& at, Upstream& u, NameIndex& names) {
  std::optional<At> protocol_at, alpn_h2_at, original_at;
  bool endpoints_given = false;
  read_map(at, {
      {"name", [&](const At& a) { read_unique_name(a, u.name, names, "upstream"); }, true},
      {"endpoints",
       [&](const At& a) {
         endpoints_given = true;
         read_list(
             a,
             [&](const At& item) {
               HostPort hp;
               if (read_host_port(item, false, hp)) u.endpoints.push_back(hp);
             },
             false);
         // The balancer keeps its endpoints in 64-bit sets (endpoint_balancer.h).
         if (u.endpoints.size() > 64) error(a, "at most 64 endpoints per upstream");
       }},
      {"original_destination",
       [&](const At& a) {
         if (read_bool(a, u.original_destination) && u.original_destination) original_at = a;
       }},
      {"connect_timeout", [&](const At& a) { read_duration(a, false, u.connect_timeout); }},
      {"pool",
       [&](const At& a) {
         read_map(a, {
                         {"max_idle",
                          [&](const At& x) { read_uint_as(x, 0, 1'000'000, u.pool.max_idle); }},
                         {"idle_timeout",
                          [&](const At& x) { read_duration(x, false, u.pool.idle_timeout); }},
                         {"max_concurrent_streams",
                          [&](const At& x) { read_uint_as(x, 1, 10'000, u.pool.max_concurrent_streams); }},
                         {"max_requests_per_connection",
                          [&](const At& x) {
                            read_uint_as(x, 0, 1'000'000'000, u.pool.max_requests_per_connection);
                          }},
                     });
       }},
      {"retry_budget",
       [&](const At& a) {
         read_map(a, {
                         {"mode",
                          [&](const At& x) {
                            read_choice(x, {{"requests", BudgetMode::requests}, {"successes", BudgetMode::successes}},
                                        u.retry_budget.mode);
                          }},
                         {"ratio",
                          [&](const At& x) { read_double(x, 0, 1000, u.retry_budget.ratio); }},
                         {"min_per_second",
                          [&](const At& x) {
                            read_double(x, 0, 1e6, u.retry_budget.min_per_second);
                          }},
                         {"scope",
                          [&](const At& x) {
                            read_choice(x, {{"local", BudgetScope::local}, {"fleet", BudgetScope::fleet}},
                                        u.retry_budget.scope);
                            if (u.retry_budget.scope == BudgetScope::fleet) fleet_uses_.push_back(x);
                          }},
                         {"service",
                          [&](const At& x) {
                            std::optional<std::string> v = read_string(x);
                            if (!v) return;
                            if (!fleet::valid_service_name(*v))
                              error(x, "invalid service name " + quoted(*v) +
                                           " (1-64 of letters, digits, '.', '_', '-')");
                            else
                              u.retry_budget.service = *v;
                          }},
                     });
         if (u.retry_budget.scope != BudgetScope::fleet) return;
         if (u.retry_budget.service.empty()) {
           if (!fleet::valid_service_name(u.name)) {
             error(a, "scope: fleet needs a service name; upstream " + quoted(u.name) +
                          " is not one, set retry_budget.service");
             return;
           }
           u.retry_budget.service = u.name;
         }
         auto [it, fresh] = fleet_services_.emplace(u.retry_budget.service, u.name);
         if (!fresh)
           error(a, "service " + quoted(u.retry_budget.service) + " already has a fleet budget (upstream " +
                        quoted(it->second) + "); one upstream per service");
       }},
      {"circuit_breaker",
       [&](const At& a) {
         CircuitBreakerConfig& cb = u.circuit_breaker;
         cb.enabled = true;  // giving the block turns it on unless it says otherwise
         read_map(a, {
                         {"enabled", [&](const At& x) { read_bool(x, cb.enabled); }},
                         {"consecutive_failures",
                          [&](const At& x) {
                            read_uint_as(x, 1, 1'000'000, cb.consecutive_failures);
                          }},
                         {"open_for", [&](const At& x) { read_duration(x, false, cb.open_for); }},
                         {"half_open_probes",
                          [&](const At& x) { read_uint_as(x, 1, 1000, cb.half_open_probes); }},
                     });
       }},
      {"balance",
       [&](const At& a) {
         read_choice(a, {{"p2c", Balance::p2c}, {"round_robin", Balance::round_robin}}, u.balance);
       }},
      {"outlier_detection", [&](const At& a) { read_outlier_detection(a, u.outlier_detection); }},
      {"health_check", [&](const At& a) { read_health_check(a, u.health_check); }},
      {"reuse",
       [&](const At& a) {
         read_choice(a, {{"safe", ConnectionReuse::safe}, {"always", ConnectionReuse::always}}, u.reuse);
       }},
      {"protocol",
       [&](const At& a) {
         protocol_at = a;
         read_choice(a,
                     {{"http1", UpstreamProtocol::http1}, {"h2c", UpstreamProtocol::h2c},
                      {"h2", UpstreamProtocol::h2}, {"auto", UpstreamProtocol::auto_}},
                     u.protocol);
       }},
      {"tls",
       [&](const At& a) {
         u.tls.emplace();
         read_upstream_tls(a, *u.tls, alpn_h2_at);
       }},
  });
  check_protocol(protocol_at, u, alpn_h2_at);
  if (original_at) {
    // Each attempt goes where the app was going, over cleartext: the app
    // speaks plain HTTP to that address (TLS from the app passes through).
    if (!u.endpoints.empty()) error(*original_at, "an upstream with original_destination: true has no endpoints");
    if (u.tls) error(*original_at, "original_destination upstreams speak cleartext (http1 or h2c): no tls block");
    if (u.health_check.enabled) error(*original_at, "original_destination upstreams have no health_check");
  } else if (!endpoints_given) {
    error(At{at.node, at.mark, child_path(at.path, "endpoints")}, "is required (or original_destination: true)");
  }
}

void Loader::check_protocol(const std::optional<At>& at, const Upstream& u, const std::optional<At>& alpn_h2_at) {
  bool h2 = u.protocol == UpstreamProtocol::h2;
  if (alpn_h2_at && !h2 && u.protocol != UpstreamProtocol::auto_)
    error(*alpn_h2_at, "h2 is offered only with protocol: h2 or auto (protocol " +
                           std::string(protocol_name(u.protocol)) + " speaks http/1.1 over TLS)");
  if (h2 && u.tls && !u.tls->alpn.empty() && u.tls->alpn != std::vector<std::string>{"h2"})
    error(at ? *at : *alpn_h2_at, "h2 offers ALPN h2 alone: tls.alpn must be [h2] or left out");
  if (!at) return;
  switch (u.protocol) {
    case UpstreamProtocol::http1: return;
    case UpstreamProtocol::auto_:
      if (!u.tls) error(*at, "\"auto\" chooses by TLS ALPN and needs a tls block (cleartext: http1)");
      return;
    case UpstreamProtocol::h2c:
      if (u.tls) error(*at, "h2c is HTTP/2 over cleartext TCP and cannot go with a tls block (over TLS: h2)");
      return;
    case UpstreamProtocol::h2:
      if (!u.tls) error(*at, "h2 is HTTP/2 over TLS and needs a tls block (cleartext: h2c)");
      return;
  }
}

void Loader::read_upgrades(const At& at, std::vector<std::string>& out) {
  out.clear();  // a given list replaces the default one
  read_list(
      at,
      [&](const At& item) {
        std::string token;
        if (!read_token(item, token, "an upgrade protocol name")) return;
        token = to_lower(token);
        if (token == "h2c") {
          error(item, "h2c is not an upgrade onelayer forwards (to speak HTTP/2 to an upstream: protocol: h2c)");
          return;
        }
        if (std::find(out.begin(), out.end(), token) == out.end()) out.push_back(token);
      },
      true);
}

void Loader::read_listener_protocols(const At& at, ListenerProtocols& out) {
  ListenerProtocols given{false, false};  // a given list replaces the default one
  read_list(
      at,
      [&](const At& item) {
        std::optional<std::string> s = read_string(item);
        if (!s) return;
        if (*s == "http1") {
          given.http1 = true;
        } else if (*s == "h2c") {
          given.h2c = true;
        } else {
          error(item, "must be http1 or h2c (HTTP/2 with prior knowledge), not " + quoted(*s));
        }
      },
      false);
  if (given.http1 || given.h2c) out = given;
}

bool Loader::read_file_name(const At& at, std::string& out) {
  std::optional<std::string> s = read_string(at);
  if (!s) return false;
  if (s->empty() || s->find('\0') != std::string::npos) {
    error(at, "must be a file name");
    return false;
  }
  out = *s;
  return true;
}

void Loader::read_listener_tls(const At& at, ListenerTls& tls) {
  read_map(at, {
      {"cert_file", [&](const At& a) { read_file_name(a, tls.cert_file); }, true},
      {"key_file", [&](const At& a) { read_file_name(a, tls.key_file); }, true},
      {"client_ca_file", [&](const At& a) { read_file_name(a, tls.client_ca_file); }},
      {"require_client_cert", [&](const At& a) { read_bool(a, tls.require_client_cert); }},
  });
  if (tls.require_client_cert && tls.client_ca_file.empty())
    error(at, "require_client_cert needs client_ca_file (the CA client certificates are checked against)");
}

void Loader::read_upstream_tls(const At& at, UpstreamTls& tls, std::optional<At>& h2_at) {
  std::optional<At> cert_at, key_at;
  read_map(at, {
      {"sni",
       [&](const At& a) {
         std::optional<std::string> s = read_string(a);
         if (!s) return;
         if (!is_hostname(*s)) {
           error(a, "must be a host name (letters, digits, '-', '.')");
           return;
         }
         tls.sni = to_lower(*s);
       }},
      {"verify", [&](const At& a) { read_bool(a, tls.verify); }},
      {"ca_file", [&](const At& a) { read_file_name(a, tls.ca_file); }},
      {"cert_file",
       [&](const At& a) {
         if (read_file_name(a, tls.cert_file)) cert_at = a;
       }},
      {"key_file",
       [&](const At& a) {
         if (read_file_name(a, tls.key_file)) key_at = a;
       }},
      {"alpn",
       [&](const At& a) {
         read_list(
             a,
             [&](const At& item) {
               std::optional<std::string> p = read_string(item);
               if (!p) return;
               if (*p != "http/1.1" && *p != "h2") {
                 error(item, "must be http/1.1 or h2 (the protocols onelayer speaks to upstreams)");
                 return;
               }
               if (*p == "h2" && !h2_at) h2_at = item;
               if (std::find(tls.alpn.begin(), tls.alpn.end(), *p) == tls.alpn.end()) tls.alpn.push_back(*p);
             },
             false);
       }},
  });
  if (cert_at && !key_at) error(*cert_at, "needs key_file too (the client certificate's private key)");
  if (key_at && !cert_at) error(*key_at, "needs cert_file too (the client certificate chain)");
}

void Loader::read_outlier_detection(const At& at, OutlierDetectionConfig& od) {
  std::optional<At> base_at, max_at;
  read_map(at, {
      {"enabled", [&](const At& x) { read_bool(x, od.enabled); }},
      {"consecutive_failures",
       [&](const At& x) { read_uint_as(x, 1, 1'000'000, od.consecutive_failures); }},
      {"base_ejection",
       [&](const At& x) {
         if (read_duration(x, false, od.base_ejection)) base_at = x;
       }},
      {"max_ejection",
       [&](const At& x) {
         if (read_duration(x, false, od.max_ejection)) max_at = x;
       }},
      {"max_ejected_percent", [&](const At& x) { read_uint_as(x, 0, 100, od.max_ejected_percent); }},
  });
  if (od.max_ejection >= od.base_ejection) return;
  if (max_at) {
    error(*max_at, "must be >= base_ejection (" + format_duration(od.base_ejection) + ")");
  } else if (base_at) {
    error(*base_at, "must be <= max_ejection (" + format_duration(od.max_ejection) + ")");
  }
}

void Loader::read_health_check(const At& at, HealthCheckConfig& hc) {
  hc.enabled = true;  // giving the block turns checks on unless it says otherwise
  std::optional<At> timeout_at;
  read_map(at, {
      {"enabled", [&](const At& x) { read_bool(x, hc.enabled); }},
      {"path",
       [&](const At& x) {
         std::optional<std::string> s = read_string(x);
         if (!s) return;
         bool printable = std::all_of(s->begin(), s->end(), [](char c) { return c > 0x20 && c < 0x7f; });
         if (s->empty() || s->front() != '/' || !printable) {
           error(x, "must start with / and hold no spaces or control characters");
         } else {
           hc.path = *s;
         }
       }},
      {"interval", [&](const At& x) { read_duration(x, false, hc.interval); }},
      {"timeout",
       [&](const At& x) {
         if (read_duration(x, false, hc.timeout)) timeout_at = x;
       }},
      {"unhealthy", [&](const At& x) { read_uint_as(x, 1, 1000, hc.unhealthy); }},
      {"healthy", [&](const At& x) { read_uint_as(x, 1, 1000, hc.healthy); }},
  });
  if (timeout_at && hc.timeout > hc.interval) {
    error(*timeout_at, "must be <= interval (" + format_duration(hc.interval) + ")");
  }
}

void Loader::check_addresses() {
  // Two sockets on one address would fail at bind time; say so now. Port 0
  // (an ephemeral port, used by tests) never collides.
  for (size_t i = 0; i < addresses_.size(); ++i) {
    if (addresses_[i].hp.port == 0) continue;
    for (size_t j = 0; j < i; ++j) {
      if (addresses_[j].hp == addresses_[i].hp) {
        error(addresses_[i].at, "address " + addresses_[i].hp.to_string() + " is also used by " +
                                    addresses_[j].at.path);
        break;
      }
    }
  }
}

void Loader::resolve_upstreams() {
  for (const UpstreamRef& ref : upstream_refs_) {
    Route& r = config_.listeners[ref.listener].routes[ref.route];
    auto it = std::find_if(config_.upstreams.begin(), config_.upstreams.end(),
                           [&](const Upstream& u) { return u.name == r.upstream; });
    if (it == config_.upstreams.end()) {
      error(ref.at, "no upstream named " + quoted(r.upstream));
    } else {
      r.upstream_index = static_cast<size_t>(it - config_.upstreams.begin());
    }
  }
}

void Loader::check_transparent() {
  for (const Listener& l : config_.listeners) {
    if (l.mode == ListenerMode::transparent && l.tls)
      error(At{YAML::Node(), YAML::Mark::null_mark(), "listeners"},
            "listener " + quoted(l.name) + ": mode transparent has no tls block (the app's own TLS passes through)");
  }
  for (const TransparentKey& k : transparent_keys_) {
    if (config_.listeners[k.listener].mode != ListenerMode::transparent)
      error(k.at, "needs mode: transparent on this listener (a proxy listener's connections have no original "
                  "destination)");
  }
  for (const UpstreamRef& ref : upstream_refs_) {
    const Listener& l = config_.listeners[ref.listener];
    const Route& r = l.routes[ref.route];
    if (r.upstream_index < config_.upstreams.size() && config_.upstreams[r.upstream_index].original_destination &&
        l.mode != ListenerMode::transparent)
      error(ref.at, "upstream " + quoted(r.upstream) +
                        " has original_destination: true and needs a listener with mode: transparent");
  }
}

// A transparent listener's request that no route matches goes to its
// original destination, once: an implicit last route per listener and
// protocol (HTTP/1.1 upstream for HTTP/1 clients, h2c for h2c clients,
// so gRPC stays HTTP/2), never matched by match_route.
static const char* const kFallbackNames[2] = {"transparent-fallback", "transparent-fallback-h2c"};

void Loader::add_transparent_fallbacks() {
  bool any = std::any_of(config_.listeners.begin(), config_.listeners.end(),
                         [](const Listener& l) { return l.mode == ListenerMode::transparent; });
  if (!any) return;
  // A name of the user's that an implicit route or upstream would repeat.
  auto reserved = [&](const auto& items, const char* path, const char* what) {
    for (const auto& item : items) {
      for (const char* name : kFallbackNames) {
        if (item.name != name) continue;
        error(At{YAML::Node(), YAML::Mark::null_mark(), path},
              std::string(what) + quoted(name) + " is reserved for transparent listeners");
        return true;
      }
    }
    return false;
  };
  if (reserved(config_.upstreams, "upstreams", "the upstream name ")) return;
  size_t first = config_.upstreams.size();
  for (int i = 0; i < 2; ++i) {
    Upstream& u = config_.upstreams.emplace_back();
    u.name = kFallbackNames[i];
    u.original_destination = true;
    u.implicit = true;
    u.protocol = i == 0 ? UpstreamProtocol::http1 : UpstreamProtocol::h2c;
  }
  for (Listener& l : config_.listeners) {
    if (l.mode != ListenerMode::transparent) continue;
    if (reserved(l.routes, "listeners", "the route name ")) return;
    for (int i = 0; i < 2; ++i) {
      Route& r = l.routes.emplace_back();
      r.name = kFallbackNames[i];
      r.upstream = kFallbackNames[i];
      r.upstream_index = first + static_cast<size_t>(i);
      r.implicit = true;
    }
  }
}

void Loader::read_fleet(const At& at, FleetConfig& f) {
  bool redis_set = false;
  read_map(at, {
      {"redis",
       [&](const At& a) {
         redis_set = true;
         if (!a.node.IsMap()) {
           read_host_port(a, false, f.redis);
           return;
         }
         read_map(a, {
             {"sentinels",
              [&](const At& x) {
                read_list(
                    x,
                    [&](const At& item) {
                      HostPort hp;
                      if (read_host_port(item, false, hp)) f.sentinels.push_back(hp);
                    },
                    false);
              },
              true},
             {"master", [&](const At& x) { read_name(x, f.master); }, true},
         });
       },
       true},
      {"password_file", [&](const At& a) { read_file_name(a, f.password_file); }},
      {"key_prefix",
       [&](const At& a) {
         std::optional<std::string> v = read_string(a);
         if (!v) return;
         // Braces would change the key's hash tag; spaces and quotes have no place in a key.
         bool ok = !v->empty() && v->size() <= 64 &&
                   std::all_of(v->begin(), v->end(), [](char c) { return is_name(std::string_view(&c, 1)) || c == ':'; });
         if (ok) f.key_prefix = *v;
         else error(a, "invalid key_prefix " + quoted(*v) + " (1-64 of letters, digits, '.', '_', '-', ':')");
       }},
      {"sync_interval",
       [&](const At& a) {
         if (read_duration(a, false, f.sync_interval) &&
             (f.sync_interval < Millis(100) || f.sync_interval > Millis(60'000)))
           error(a, "sync_interval must be between 100ms and 60s");
       }},
      {"timeout", [&](const At& a) { read_duration(a, false, f.timeout); }},
      {"stale_after", [&](const At& a) { read_duration(a, false, f.stale_after); }},
  });
  if (!redis_set) return;  // read_map said so
  if (f.timeout > f.sync_interval)
    error(at, "timeout (" + format_duration(f.timeout) + ") must not be longer than sync_interval (" +
                  format_duration(f.sync_interval) + ")");
  if (f.stale_after <= f.sync_interval)
    error(at, "stale_after (" + format_duration(f.stale_after) + ") must be longer than sync_interval (" +
                  format_duration(f.sync_interval) + ")");
}

void Loader::check_fleet() {
  if (config_.fleet) return;
  for (const At& a : fleet_uses_) error(a, "needs a top-level fleet: block (where the fleet's Redis is)");
}

LoadResult Loader::load(std::string_view text) {
  config_.source_path = file_;
  config_.source_text = std::string(text);
  try {
    std::string owned(text);
    YAML::Mark where;
    StreamShape shape = scan_documents(owned, where);
    YAML::Node root;
    if (shape == StreamShape::one_document) root = YAML::Load(owned);  // the first document only
    if (shape == StreamShape::stuck) {
      bool inside = where.pos >= 0 && static_cast<size_t>(where.pos) < owned.size();
      char c = inside ? owned[static_cast<size_t>(where.pos)] : '?';
      error(At{YAML::Node(), where, ""}, std::string("invalid YAML: unexpected '") + c + "'");
    } else if (shape == StreamShape::several_documents) {
      error(At{YAML::Node(), where, ""}, "more than one YAML document; expected one");
    } else if (root.IsNull()) {
      error(At{YAML::Node(), YAML::Mark(), ""}, "empty configuration");
    } else {
      read_root(At{root, root.Mark(), ""});
      check_addresses();
      resolve_upstreams();
      check_transparent();
      if (errors_.empty()) add_transparent_fallbacks();
      check_fleet();
    }
  } catch (const YAML::Exception& e) {
    // Syntax errors (ParserException), too-deep nesting (DeepRecursion), ...
    error(At{YAML::Node(), e.mark, ""}, "invalid YAML: " + e.msg);
  } catch (const std::exception& e) {
    error(At{YAML::Node(), YAML::Mark::null_mark(), ""}, std::string("cannot load: ") + e.what());
  }
  LoadResult result;
  std::stable_sort(errors_.begin(), errors_.end(), [](const ConfigError& a, const ConfigError& b) {
    return std::tie(a.line, a.column) < std::tie(b.line, b.column);
  });
  result.errors = std::move(errors_);
  if (result.errors.empty()) result.config = std::make_shared<const Config>(std::move(config_));
  return result;
}

// ------------------------------------------------------------------ emitting

const char* jitter_name(Jitter j) {
  switch (j) {
    case Jitter::full: return "full";
    case Jitter::equal: return "equal";
    case Jitter::decorrelated: return "decorrelated";
    case Jitter::none: return "none";
  }
  return "full";
}

const char* inner_hops_name(InnerHops h) {
  switch (h) {
    case InnerHops::forbid: return "forbid";
    case InnerHops::strip: return "strip";
    case InnerHops::pass: return "pass";
  }
  return "forbid";
}

const char* underscore_headers_name(UnderscoreHeaders u) {
  switch (u) {
    case UnderscoreHeaders::drop: return "drop";
    case UnderscoreHeaders::reject: return "reject";
    case UnderscoreHeaders::allow: return "allow";
  }
  return "drop";
}

const char* protocol_name(UpstreamProtocol p) {
  switch (p) {
    case UpstreamProtocol::http1: return "http1";
    case UpstreamProtocol::h2c: return "h2c";
    case UpstreamProtocol::h2: return "h2";
    case UpstreamProtocol::auto_: return "auto";
  }
  return "http1";
}

void emit_kv(YAML::Emitter& e, const char* key, const std::string& value) {
  e << YAML::Key << key << YAML::Value << value;
}

void emit_retry(YAML::Emitter& e, const RetryPolicy& p) {
  e << YAML::Key << "retry" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "max_attempts" << YAML::Value << p.max_attempts;
  if (p.per_try_timeout) emit_kv(e, "per_try_timeout", format_duration(*p.per_try_timeout));
  e << YAML::Key << "retry_on" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  if (p.retry_on.connect_failure) e << "connect-failure";
  if (p.retry_on.reset) e << "reset";
  if (p.retry_on.timeout) e << "timeout";
  for (int code : p.retry_on.statuses) e << code;
  for (GrpcStatus g : p.retry_on.grpc_statuses) e << grpc_status_name(g);
  e << YAML::EndSeq;
  e << YAML::Key << "backoff" << YAML::Value << YAML::Flow << YAML::BeginMap;
  emit_kv(e, "base", format_duration(p.backoff.base));
  emit_kv(e, "cap", format_duration(p.backoff.cap));
  emit_kv(e, "jitter", jitter_name(p.backoff.jitter));
  e << YAML::EndMap;
  e << YAML::Key << "retry_after" << YAML::Value << YAML::Flow << YAML::BeginMap;
  e << YAML::Key << "honor" << YAML::Value << p.retry_after.honor;
  emit_kv(e, "max", format_duration(p.retry_after.max));
  e << YAML::EndMap;
  emit_kv(e, "idempotency_key", p.idempotency_key);
  emit_kv(e, "buffer_limit", format_size(p.buffer_limit));
  e << YAML::Key << "idempotent" << YAML::Value << p.idempotent;
  if (p.hedge.enabled) {
    e << YAML::Key << "hedge" << YAML::Value << YAML::Flow << YAML::BeginMap;
    emit_kv(e, "after", latency_threshold_text(p.hedge.after));
    e << YAML::Key << "max" << YAML::Value << p.hedge.max;
    e << YAML::EndMap;
  } else {
    e << YAML::Key << "hedge" << YAML::Value << YAML::Null;
  }
  if (p.min_time_left) emit_kv(e, "min_time_left", latency_threshold_text(*p.min_time_left));
  else e << YAML::Key << "min_time_left" << YAML::Value << YAML::Null;
  e << YAML::EndMap;
}

void emit_route(YAML::Emitter& e, const Route& r) {
  e << YAML::BeginMap;
  emit_kv(e, "name", r.name);
  e << YAML::Key << "match" << YAML::Value << YAML::BeginMap;
  if (!r.match.host.empty()) emit_kv(e, "host", r.match.host);
  emit_kv(e, "path_prefix", r.match.path_prefix);
  if (!r.match.methods.empty()) {
    e << YAML::Key << "methods" << YAML::Value << YAML::Flow << r.match.methods;
  }
  if (r.match.destination) emit_kv(e, "destination", r.match.destination->to_string());
  if (r.match.destination_port != 0) e << YAML::Key << "destination_port" << YAML::Value << r.match.destination_port;
  if (!r.match.callers.empty()) {
    e << YAML::Key << "callers" << YAML::Value << YAML::Flow << r.match.callers;
  }
  e << YAML::EndMap;
  emit_kv(e, "upstream", r.upstream);
  emit_kv(e, "timeout", format_duration(r.timeout));
  emit_kv(e, "inner_hops", inner_hops_name(r.inner_hops));
  if (r.has_retry) emit_retry(e, r.retry);
  if (r.fault.enabled) {
    e << YAML::Key << "fault" << YAML::Value << YAML::BeginMap;
    if (r.fault.abort_status != 0) {
      e << YAML::Key << "abort" << YAML::Value << YAML::Flow << YAML::BeginMap;
      e << YAML::Key << "status" << YAML::Value << r.fault.abort_status;
      emit_kv(e, "percent", format_double(r.fault.abort_percent));
      e << YAML::EndMap;
    }
    if (r.fault.delay.count() > 0) {
      e << YAML::Key << "delay" << YAML::Value << YAML::Flow << YAML::BeginMap;
      emit_kv(e, "duration", format_duration(r.fault.delay));
      emit_kv(e, "percent", format_double(r.fault.delay_percent));
      e << YAML::EndMap;
    }
    if (r.fault.grpc_status >= 0) e << YAML::Key << "grpc_status" << YAML::Value << r.fault.grpc_status;
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

void emit_listener(YAML::Emitter& e, const Listener& l) {
  e << YAML::BeginMap;
  emit_kv(e, "name", l.name);
  emit_kv(e, "listen", l.listen.to_string());
  e << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
  emit_kv(e, "max_header_bytes", format_size(l.limits.max_header_bytes));
  emit_kv(e, "max_body_bytes", format_size(l.limits.max_body_bytes));
  emit_kv(e, "header_timeout", format_duration(l.limits.header_timeout));
  emit_kv(e, "idle_timeout", format_duration(l.limits.idle_timeout));
  e << YAML::Key << "max_connections" << YAML::Value << l.limits.max_connections;
  e << YAML::Key << "max_concurrent_streams" << YAML::Value << l.limits.max_concurrent_streams;
  e << YAML::EndMap;
  e << YAML::Key << "max_concurrent_requests" << YAML::Value << l.max_concurrent_requests;
  emit_kv(e, "headers_with_underscores", underscore_headers_name(l.headers_with_underscores));
  if (l.via) e << YAML::Key << "via" << YAML::Value << *l.via;
  if (l.x_forwarded_for) e << YAML::Key << "x_forwarded_for" << YAML::Value << *l.x_forwarded_for;
  e << YAML::Key << "access_log" << YAML::Value << l.access_log;
  if (!l.fleet_service.empty()) emit_kv(e, "fleet_service", l.fleet_service);
  e << YAML::Key << "upgrades" << YAML::Value << YAML::Flow << l.upgrades;
  std::vector<std::string> protocols;
  if (l.protocols.http1) protocols.emplace_back("http1");
  if (l.protocols.h2c) protocols.emplace_back("h2c");
  e << YAML::Key << "protocols" << YAML::Value << YAML::Flow << protocols;
  if (l.tls) {
    e << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
    emit_kv(e, "cert_file", l.tls->cert_file);
    emit_kv(e, "key_file", l.tls->key_file);
    if (!l.tls->client_ca_file.empty()) {
      emit_kv(e, "client_ca_file", l.tls->client_ca_file);
      e << YAML::Key << "require_client_cert" << YAML::Value << l.tls->require_client_cert;
    }
    e << YAML::EndMap;
  }
  if (l.mode == ListenerMode::transparent) {
    emit_kv(e, "mode", "transparent");
    emit_kv(e, "detect_timeout", format_duration(l.detect_timeout));
  }
  if (!l.allowed_callers.empty())
    e << YAML::Key << "allowed_callers" << YAML::Value << YAML::Flow << l.allowed_callers;
  if (!l.caller_header.empty()) emit_kv(e, "caller_header", l.caller_header);
  e << YAML::Key << "routes" << YAML::Value << YAML::BeginSeq;
  for (const Route& r : l.routes)
    if (!r.implicit) emit_route(e, r);
  e << YAML::EndSeq;
  e << YAML::EndMap;
}

void emit_upstream(YAML::Emitter& e, const Upstream& u) {
  e << YAML::BeginMap;
  emit_kv(e, "name", u.name);
  if (u.original_destination) {
    e << YAML::Key << "original_destination" << YAML::Value << true;
  } else {
    e << YAML::Key << "endpoints" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const HostPort& hp : u.endpoints) e << hp.to_string();
    e << YAML::EndSeq;
  }
  emit_kv(e, "connect_timeout", format_duration(u.connect_timeout));
  e << YAML::Key << "pool" << YAML::Value << YAML::Flow << YAML::BeginMap;
  e << YAML::Key << "max_idle" << YAML::Value << u.pool.max_idle;
  emit_kv(e, "idle_timeout", format_duration(u.pool.idle_timeout));
  e << YAML::Key << "max_concurrent_streams" << YAML::Value << u.pool.max_concurrent_streams;
  e << YAML::Key << "max_requests_per_connection" << YAML::Value << u.pool.max_requests_per_connection;
  e << YAML::EndMap;
  e << YAML::Key << "retry_budget" << YAML::Value << YAML::Flow << YAML::BeginMap;
  emit_kv(e, "mode", u.retry_budget.mode == BudgetMode::successes ? "successes" : "requests");
  emit_kv(e, "ratio", format_double(u.retry_budget.ratio));
  emit_kv(e, "min_per_second", format_double(u.retry_budget.min_per_second));
  emit_kv(e, "scope", u.retry_budget.scope == BudgetScope::fleet ? "fleet" : "local");
  if (!u.retry_budget.service.empty()) emit_kv(e, "service", u.retry_budget.service);
  e << YAML::EndMap;
  const CircuitBreakerConfig& cb = u.circuit_breaker;
  e << YAML::Key << "circuit_breaker" << YAML::Value << YAML::Flow << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << cb.enabled;
  e << YAML::Key << "consecutive_failures" << YAML::Value << cb.consecutive_failures;
  emit_kv(e, "open_for", format_duration(cb.open_for));
  e << YAML::Key << "half_open_probes" << YAML::Value << cb.half_open_probes;
  e << YAML::EndMap;
  emit_kv(e, "balance", u.balance == Balance::p2c ? "p2c" : "round_robin");
  const OutlierDetectionConfig& od = u.outlier_detection;
  e << YAML::Key << "outlier_detection" << YAML::Value << YAML::Flow << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << od.enabled;
  e << YAML::Key << "consecutive_failures" << YAML::Value << od.consecutive_failures;
  emit_kv(e, "base_ejection", format_duration(od.base_ejection));
  emit_kv(e, "max_ejection", format_duration(od.max_ejection));
  e << YAML::Key << "max_ejected_percent" << YAML::Value << od.max_ejected_percent;
  e << YAML::EndMap;
  const HealthCheckConfig& hc = u.health_check;
  e << YAML::Key << "health_check" << YAML::Value << YAML::Flow << YAML::BeginMap;
  e << YAML::Key << "enabled" << YAML::Value << hc.enabled;
  emit_kv(e, "path", hc.path);
  emit_kv(e, "interval", format_duration(hc.interval));
  emit_kv(e, "timeout", format_duration(hc.timeout));
  e << YAML::Key << "unhealthy" << YAML::Value << hc.unhealthy;
  e << YAML::Key << "healthy" << YAML::Value << hc.healthy;
  e << YAML::EndMap;
  emit_kv(e, "protocol", protocol_name(u.protocol));
  emit_kv(e, "reuse", u.reuse == ConnectionReuse::safe ? "safe" : "always");
  if (u.tls) {
    const UpstreamTls& t = *u.tls;
    e << YAML::Key << "tls" << YAML::Value << YAML::BeginMap;
    if (!t.sni.empty()) emit_kv(e, "sni", t.sni);
    e << YAML::Key << "verify" << YAML::Value << t.verify;
    if (!t.ca_file.empty()) emit_kv(e, "ca_file", t.ca_file);
    if (!t.cert_file.empty()) emit_kv(e, "cert_file", t.cert_file);
    if (!t.key_file.empty()) emit_kv(e, "key_file", t.key_file);
    if (!t.alpn.empty()) e << YAML::Key << "alpn" << YAML::Value << YAML::Flow << t.alpn;
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

}  // namespace

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!path.empty()) out += path + ": ";
  out += message;
  return out;
}

std::string format_errors(const std::vector<ConfigError>& errors) {
  std::string out;
  for (const ConfigError& e : errors) out += e.to_string() + "\n";
  return out;
}

LoadResult load_config_string(std::string_view yaml_text, const std::string& file_name) {
  return Loader(file_name).load(yaml_text);
}

LoadResult load_config_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  std::string text;
  int err = 0;
  if (f == nullptr) {
    err = errno;
  } else {
    char buf[8192];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    if (std::ferror(f)) err = errno != 0 ? errno : EIO;
    std::fclose(f);
  }
  if (err != 0) {
    LoadResult result;
    result.errors.push_back(
        ConfigError{path, 0, 0, "", std::string("cannot read file: ") + std::strerror(err)});
    return result;
  }
  return load_config_string(text, path);
}

std::string default_layer_id() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "onelayer";
  std::string name(buf);
  return is_token(name) ? name : "onelayer";
}

std::string config_to_yaml(const Config& c) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  emit_kv(e, "layer_id", c.layer_id);
  e << YAML::Key << "admin" << YAML::Value << YAML::BeginMap;
  emit_kv(e, "listen", c.admin_listen.to_string());
  if (!c.admin_token_file.empty()) emit_kv(e, "token_file", c.admin_token_file);
  e << YAML::Key << "allow_remote_mutations" << YAML::Value << c.admin_allow_remote_mutations;
  e << YAML::EndMap;
  e << YAML::Key << "workers" << YAML::Value << c.workers;
  emit_kv(e, "drain_timeout", format_duration(c.drain_timeout));
  e << YAML::Key << "propagate_baggage" << YAML::Value << c.propagate_baggage;
  e << YAML::Key << "via" << YAML::Value << c.via;
  e << YAML::Key << "x_forwarded_for" << YAML::Value << c.x_forwarded_for;
  e << YAML::Key << "headers" << YAML::Value << YAML::BeginMap;
  emit_kv(e, "retry_owner", c.headers.retry_owner);
  emit_kv(e, "retry_attempt", c.headers.retry_attempt);
  emit_kv(e, "request_timeout_ms", c.headers.request_timeout_ms);
  emit_kv(e, "retry_exhausted", c.headers.retry_exhausted);
  emit_kv(e, "baggage_member", c.headers.baggage_member);
  e << YAML::EndMap;
  if (c.fleet) {
    // The password is never in Config: only where it is read from.
    const FleetConfig& f = *c.fleet;
    e << YAML::Key << "fleet" << YAML::Value << YAML::BeginMap;
    if (f.sentinels.empty()) {
      emit_kv(e, "redis", f.redis.to_string());
    } else {
      e << YAML::Key << "redis" << YAML::Value << YAML::Flow << YAML::BeginMap;
      e << YAML::Key << "sentinels" << YAML::Value << YAML::BeginSeq;
      for (const HostPort& hp : f.sentinels) e << hp.to_string();
      e << YAML::EndSeq;
      emit_kv(e, "master", f.master);
      e << YAML::EndMap;
    }
    if (!f.password_file.empty()) emit_kv(e, "password_file", f.password_file);
    emit_kv(e, "key_prefix", f.key_prefix);
    emit_kv(e, "sync_interval", format_duration(f.sync_interval));
    emit_kv(e, "timeout", format_duration(f.timeout));
    emit_kv(e, "stale_after", format_duration(f.stale_after));
    e << YAML::EndMap;
  }
  e << YAML::Key << "listeners" << YAML::Value << YAML::BeginSeq;
  for (const Listener& l : c.listeners) emit_listener(e, l);
  e << YAML::EndSeq;
  e << YAML::Key << "upstreams" << YAML::Value << YAML::BeginSeq;
  for (const Upstream& u : c.upstreams)
    if (!u.implicit) emit_upstream(e, u);
  e << YAML::EndSeq;
  e << YAML::EndMap;
  std::string out = "# onelayer: the configuration in force, every default filled in\n";
  out += e.c_str();
  out += '\n';
  return out;
}

}  // namespace onelayer
