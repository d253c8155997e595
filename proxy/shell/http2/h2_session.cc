#include "shell/http2/h2_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <vector>

#include "core/h2wire/h2_frame_header.h"
#include "core/h2wire/h2_message_rules.h"
#include "shell/http2/h2_field_block.h"
#include "shell/memory/h2_memory_pool.h"
#include "shell/memory/spare_list.h"
#include "shell/memory/spare_string_rooms.h"
#include "shell/memory/string_overwrite.h"

namespace onelayer {

namespace {

// announce_drain(): the notice's stream identifier (2^31-1, RFC 9113 6.8)
// and the opaque data of the PING that follows it.
constexpr int32_t kLargestStreamId = 0x7fffffff;
constexpr uint8_t kDrainPing[8] = {'o', 'l', '-', 'd', 'r', 'a', 'i', 'n'};

// A PING frame (either way) that carries announce_drain()'s opaque data.
bool is_drain_ping(const nghttp2_frame* frame) {
  return std::memcmp(frame->ping.opaque_data, kDrainPing, sizeof kDrainPing) == 0;
}

// `n` is the name `literal`: its length, then one memcmp of a length known
// at compile time (inlined as a load or two), whatever the compiler decides
// about std::string_view's own comparison.
template <size_t N>
bool is_name(std::string_view n, const char (&literal)[N]) {
  return n.size() == N - 1 && std::memcmp(n.data(), literal, N - 1) == 0;
}

// What becomes of a field (its name in lower case) on the way out. By length
// first: this runs for every field sent.
//
// Connection-specific fields (RFC 9113 8.2.2) are dropped: a peer must treat
// a message carrying one as malformed ("te: trailers" is the one value
// allowed).
//
// Fields whose value is new on every message (trace and request ids, the
// time left) go as literals never indexed (RFC 7541 6.2.3). Indexed, each
// would take a slot of the HPACK dynamic table on every request and push
// out the fields that do repeat (user-agent, via, ...), which then go as
// literals again: more bytes and more work for both ends. None of their
// names is in the static table; how the name still goes by index is
// FieldList::add_regular's.
//
// The time left (the request timeout header, x-request-timeout-ms unless
// configured otherwise, and grpc-timeout) is the exception that
// often repeats: a first attempt sent as soon as the request arrived has
// the whole route timeout less a fraction of a millisecond, the same
// number on request after request. Such a value goes indexed when it is
// the one the previous field of that name on the connection carried: the
// first repeat enters the table, the next ones are one byte each.
enum class OutgoingField { indexed, never_indexed, dropped };

// The names of the never-indexed fields, each a slot of
// H2Session::PerMessageFields::sent; the time-left ones come first, each
// also a slot of its last_value.
enum PerMessageName : uint8_t {
  kRequestTimeout,  // headers.request_timeout_ms
  kGrpcTimeout,
  kB3,
  kBaggage,
  kTracestate,
  kTraceparent,
  kXB3Spanid,
  kXRequestId,
  kXB3Traceid,
  kSentryTrace,
  kUberTraceId,
  kXAmznTraceId,
  kXB3Parentspanid,
  kXCloudTraceContext,
  kPerMessageNameCount,
};

struct OutgoingRule {
  OutgoingField kind = OutgoingField::indexed;
  PerMessageName name = kB3;  // never_indexed: which one
};

constexpr OutgoingRule kIndexed{};
constexpr OutgoingRule kDropped{OutgoingField::dropped};
constexpr OutgoingRule never_indexed(PerMessageName name) { return {OutgoingField::never_indexed, name}; }

// `request_timeout`: the configured name of the request timeout header,
// in lower case (as `n` is).
OutgoingRule outgoing_field(std::string_view n, std::string_view value, std::string_view request_timeout) {
  if (n.size() == request_timeout.size() && n == request_timeout) return never_indexed(kRequestTimeout);
  switch (n.size()) {
    case 2:
      if (is_name(n, "te")) return iequals(trim_ows(value), "trailers") ? kIndexed : kDropped;
      return is_name(n, "b3") ? never_indexed(kB3) : kIndexed;
    case 7:
      if (is_name(n, "upgrade")) return kDropped;
      return is_name(n, "baggage") ? never_indexed(kBaggage) : kIndexed;
    case 10:
      if (is_name(n, "connection") || is_name(n, "keep-alive")) return kDropped;
      return is_name(n, "tracestate") ? never_indexed(kTracestate) : kIndexed;
    case 11:
      if (is_name(n, "traceparent")) return never_indexed(kTraceparent);
      return is_name(n, "x-b3-spanid") ? never_indexed(kXB3Spanid) : kIndexed;
    case 12:
      if (is_name(n, "x-request-id")) return never_indexed(kXRequestId);
      if (is_name(n, "grpc-timeout")) return never_indexed(kGrpcTimeout);
      if (is_name(n, "x-b3-traceid")) return never_indexed(kXB3Traceid);
      return is_name(n, "sentry-trace") ? never_indexed(kSentryTrace) : kIndexed;
    case 13: return is_name(n, "uber-trace-id") ? never_indexed(kUberTraceId) : kIndexed;
    case 15: return is_name(n, "x-amzn-trace-id") ? never_indexed(kXAmznTraceId) : kIndexed;
    case 16: return is_name(n, "proxy-connection") ? kDropped : kIndexed;
    case 17:
      if (is_name(n, "transfer-encoding")) return kDropped;
      return is_name(n, "x-b3-parentspanid") ? never_indexed(kXB3Parentspanid) : kIndexed;
    case 21: return is_name(n, "x-cloud-trace-context") ? never_indexed(kXCloudTraceContext) : kIndexed;
    default: return kIndexed;
  }
}

// A never-indexed field's name is re-sent into the dynamic table on every
// this-many-th message of the connection that carries it (the first one
// included). Fields that repeat are found whole in the table and never
// enter it twice, so the seeded entry only goes once 4 KB (the table) of
// new entries came after it; if that happens, the messages until the next
// seed carry the name as a literal (what every message did before), and
// when it does not, a seed costs one entry of about 100 bytes in 64
// messages. The policy counts messages and does not ask the encoder
// (HpackSplice's) which entries it evicted. A seed whose message never went out
// (reset before it was written) is made up for the same way.
constexpr uint32_t kReseedEvery = 64;

// The name/value pairs of one submitted head, with the flags that say how
// each is sent: they point at the caller's strings, which outlive the call
// (HeldHead::keep() copies those that do not outlive the frame); only a name
// that needs lower-casing is copied, into the list. A usual head fits in the list
// itself (on the stack: no allocation per submit); a longer one spills to
// the heap.
class FieldList {
 public:
  // For heads without regular fields (a status, the 431): a never-indexed
  // field would go with its name as a literal.
  FieldList() = default;
  // `per_message`: what the session sent with each PerMessageName
  // (kPerMessageNameCount of them), read and advanced by add_regular().
  // With `no_copy`, the names and values outlive the frame (an
  // HpackSplice::HeldHead holds them): HeldHead::keep() takes pointers instead
  // of copying every one.
  explicit FieldList(H2Session::PerMessageFields* per_message, bool no_copy = false)
      : per_message_(per_message), no_copy_(no_copy) {}
  FieldList(const FieldList&) = delete;
  FieldList& operator=(const FieldList&) = delete;
  // Inline up to kInline fields; the spill out of line, so that the common
  // case stays small enough for GCC to inline it into every caller (it made
  // calls of some of them, which then cost more than the copies they do).
  void add(std::string_view name, std::string_view value, uint8_t flags = NGHTTP2_NV_FLAG_NONE) {
    if (no_copy_) flags |= NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
    nghttp2_nv nv{bytes(name), bytes(value), name.size(), value.size(), flags};
    // Below kInline fields nothing has spilled: the list spills only once
    // its inline room is full, and never shrinks.
    if (size_ < kInline) {
      inline_[size_++] = nv;
      return;
    }
    add_spilled(nv);
  }
  // Once per list (lowered_ is sized for one list of fields).
  void add_fields(const Headers& fields) {
    for (const Header& h : fields) {
      std::string_view n = h.name;
      if (has_ascii_upper(n)) n = lowered(fields, n);
      add_regular(n, h.value);
    }
  }
  void add_request_line(std::string_view method, std::string_view scheme, std::string_view authority,
                        std::string_view path) {
    add(":method", method);
    add(":scheme", scheme);
    if (!authority.empty()) add(":authority", authority);
    if (method != "CONNECT") add(":path", path);
  }
  // A block's names are in lower case already.
  void add_block(const H2FieldBlock& fields) {
    for (size_t i = 0; i < fields.size(); ++i) add_regular(fields[i].name, fields[i].value);
  }
  // :status with its three digits kept in the list (copied by nghttp2:
  // the list lives on the caller's stack).
  void add_status(int status) {
    const char* end = std::to_chars(status_, status_ + sizeof status_, status).ptr;
    const bool no_copy = no_copy_;
    no_copy_ = false;
    add(":status", std::string_view(status_, static_cast<size_t>(end - status_)));
    no_copy_ = no_copy;
  }
  const nghttp2_nv* data() const { return spill_.empty() ? inline_ : spill_.data(); }
  size_t size() const { return size_; }

 private:
  [[gnu::noinline]] void add_spilled(const nghttp2_nv& nv) {
    if (spill_.empty()) spill_.assign(inline_, inline_ + size_);
    spill_.push_back(nv);
    ++size_;
  }
  static uint8_t* bytes(std::string_view s) { return reinterpret_cast<uint8_t*>(const_cast<char*>(s.data())); }

  // A regular field (name in lower case): dropped, indexed or never indexed
  // as outgoing_field() says; pseudo-header names are not taken here.
  //
  // A never-indexed field still has its name sent by index: the encoder
  // looks a never-indexed field's name up in its dynamic table (RFC 7541
  // 6.2.3 allows the reference), so the first such field of a connection,
  // and every kReseedEvery-th, goes without the flag (the encoder then
  // indexes it: name and this message's value enter the table) and the
  // others refer to that entry's name. The value held there is one
  // message's trace or request id or time left: not a secret (it is sent
  // in the clear to the same peer anyway), only of no use again. Fields
  // that are secret (authorization, short cookies) are not on the list:
  // the encoder itself never indexes them.
  void add_regular(std::string_view name, std::string_view value) {
    if (name.empty() || name[0] == ':') return;
    OutgoingRule rule = outgoing_field(name, value, request_timeout_name());
    if (rule.kind == OutgoingField::dropped) return;
    if (rule.kind == OutgoingField::indexed || repeats_time_left(rule.name, value) || seeds_name(rule.name)) {
      add(name, value);
      return;
    }
    add(name, value, NGHTTP2_NV_FLAG_NO_INDEX);
  }

  std::string_view request_timeout_name() const {
    static const std::string kDefault = HeaderNames{}.request_timeout_ms;
    return per_message_ ? std::string_view(per_message_->request_timeout_name) : std::string_view(kDefault);
  }

  // Whether a field of `name`, never indexed, goes with indexing this time
  // (counted); never without the session's counts.
  bool seeds_name(PerMessageName name) {
    return per_message_ && per_message_->sent[name]++ % kReseedEvery == 0;
  }

  // Whether `value` of a time-left field is the one the previous field of
  // that name carried; the value is kept for the next one either way.
  bool repeats_time_left(PerMessageName name, std::string_view value) {
    if (!per_message_ || name >= H2Session::kTimeLeftNames || value.empty()) return false;
    auto& last = per_message_->last_value[name];
    uint8_t& size = per_message_->last_size[name];
    if (value.size() > last.size()) {
      size = 0;
      return false;
    }
    if (value.size() == size && std::memcmp(last.data(), value.data(), size) == 0) return true;
    std::memcpy(last.data(), value.data(), value.size());
    size = static_cast<uint8_t>(value.size());
    return false;
  }

  // `name` in lower case, kept in lowered_ for the life of the list. The
  // first call sizes it for every name of `fields`, so it never moves and
  // the views given out stay valid.
  std::string_view lowered(const Headers& fields, std::string_view name) {
    if (!lowered_sized_) {
      size_t all = 0;
      for (const Header& h : fields) all += h.name.size();
      lowered_.reserve(all);
      lowered_sized_ = true;
    }
    size_t at = lowered_.size();
    lowered_.resize(at + name.size());
    copy_lowercase(name, lowered_.data() + at);
    return std::string_view(lowered_).substr(at, name.size());
  }

  static constexpr size_t kInline = 32;
  H2Session::PerMessageFields* per_message_ = nullptr;
  nghttp2_nv inline_[kInline];  // the first kInline fields (left uninitialised until added)
  size_t size_ = 0;
  std::vector<nghttp2_nv> spill_;  // every field, once there are more
  std::string lowered_;
  bool lowered_sized_ = false;
  bool no_copy_ = false;
  char status_[4] = {};
};

// The field lists of received heads, kept per thread with their room and
// with their fields: a list the Handler hands back after on_head() (the
// upstream side does, and the exchange of a downstream request when it
// ends) serves the next head without an allocation, and a field that comes
// again at the same place is written over the old one's strings (a value
// over std::string's inline 15 bytes, a date or a user-agent, needs none
// either). One set for each role: the requests a server receives are alike,
// and so are the responses a client receives, but not one like the other.
// Bounded in count, in the room a kept list may have and in the bytes its
// strings hold.
constexpr size_t kSpareFieldRoom = 32;
constexpr size_t kSpareFieldBytes = 1024;
constexpr size_t kSpareFieldLists = 512;
template <H2Session::Role>
struct FieldListOf {
  Headers fields;
};
template <H2Session::Role role>
using SpareFieldLists = SpareList<FieldListOf<role>, kSpareFieldLists>;

template <H2Session::Role role>
Headers take_field_list_of() {
  FieldListOf<role> kept;
  if (!SpareFieldLists<role>::take(kept)) kept.fields.reserve(12);  // a usual head at once: no regrowth per field
  return std::move(kept.fields);
}

Headers take_field_list(H2Session::Role role) {
  using Role = H2Session::Role;
  return role == Role::server ? take_field_list_of<Role::server>() : take_field_list_of<Role::client>();
}

// The bytes the strings of `h` hold on the heap.
size_t string_bytes(const Headers& h) {
  static const size_t kInlineRoom = std::string().capacity();  // the short-string room (not constexpr for clang)
  size_t bytes = 0;
  for (const Header& f : h) {
    if (f.name.capacity() > kInlineRoom) bytes += f.name.capacity();
    if (f.value.capacity() > kInlineRoom) bytes += f.value.capacity();
  }
  return bytes;
}

// Keeps `h` (fields and all) for a later head of a session in `role`,
// unless it is over the bounds.
template <H2Session::Role role>
void give_back_field_list_of(Headers& h) {
  if (h.capacity() == 0 || h.capacity() > kSpareFieldRoom || string_bytes(h) > kSpareFieldBytes) return;
  if (SpareFieldLists<role>::kept() < kSpareFieldLists) SpareFieldLists<role>::give_back(FieldListOf<role>{std::move(h)});
}

void give_back_field_list(H2Session::Role role, Headers& h) {
  using Role = H2Session::Role;
  if (role == Role::server) give_back_field_list_of<Role::server>(h);
  else give_back_field_list_of<Role::client>(h);
}

// A field of the head being received: the next one of `fields`, whose
// first `used` are this head's; past them, what is left from an earlier
// head is overwritten. A value that does not fit the room of the leftover
// in its place takes a later leftover's that has it (the lists come back
// with their fields moved about: the downstream puts Host first). Out of
// line: on_header() runs for every field, and this inlined there made the
// callback dearer (profile.sh --h2).
[[gnu::noinline, gnu::flatten]] void put_field(Headers& fields, size_t& used, std::string_view name, std::string_view value) {
  if (used == fields.size()) {
    fields.emplace_back();
  } else if (fields[used].value.capacity() < value.size()) {
    for (size_t i = used + 1; i < fields.size(); ++i) {
      if (fields[i].value.capacity() < value.size()) continue;
      fields[used].value.swap(fields[i].value);
      break;
    }
  }
  Header& f = fields[used++];
  overwrite(f.name, name);
  overwrite(f.value, value);
}

uint32_t fatal_code(int rv) {
  switch (rv) {
    case NGHTTP2_ERR_FLOODED:
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
      return H2Session::kEnhanceYourCalm;
    case NGHTTP2_ERR_NOMEM:
      return H2Session::kInternalError;
    default:
      return H2Session::kProtocolError;
  }
}

// Why nghttp2 ended the connection, for the log line: our words for the
// floods it stops (nghttp2's own say only "Flooding was detected"), its
// own for the rest.
const char* fatal_reason(int rv) {
  switch (rv) {
    case NGHTTP2_ERR_FLOODED:
      return "control frame flood (SETTINGS or PING acknowledgements piling up unread)";
    case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS:
      return "CONTINUATION flood";
    default:
      return nghttp2_strerror(rv);
  }
}

}  // namespace

void H2Session::keep_field_list(Headers& fields) { give_back_field_list(Role::server, fields); }
size_t H2Session::spare_field_lists() { return SpareFieldLists<Role::server>::kept(); }

struct H2Session::Stream {
  ONELAYER_RECYCLED_BLOCKS(Stream)
  int32_t id = 0;
  bool peer_opened = false;
  Stream* prev = nullptr;  // the session's list of its streams
  Stream* next = nullptr;
  // Receiving.
  enum class Block { none, head, trailers } block = Block::none;
  H2MessageRules rules;       // what the peer's message must keep to (a request, unless we opened the stream)
  bool malformed = false;     // the block being decoded broke a rule: its fields go nowhere
  Head head;
  size_t head_fields = 0;     // the fields of head.fields this head has so far (the rest are left over)
  Headers trailers;
  size_t block_bytes = 0;     // RFC 9113 size of the header block being decoded
  bool oversized = false;     // that block went over max_header_list_bytes
  bool head_delivered = false;
  bool refused = false;       // answered by the session itself; the Handler never saw it
  bool peer_end = false;      // the peer's END_STREAM came
  // Sending.
  bool head_submitted = false;
  bool has_provider = false;  // a body or trailers may follow our head
  bool local_ended = false;   // end_stream() or send_trailers() was called
  bool deferred = false;      // the data provider is waiting for bytes
  bool trailers_pending = false;
  Headers out_trailers;
  std::string out;
  size_t out_off = 0;
  bool local_reset = false;   // reset_stream(), or our RST NO_ERROR after a full response
  bool head_framed = false;   // our head went out (or was dropped)
  bool reset_after_head = false;  // reset_stream_after_head(): the RST waits for head_framed
  uint32_t reset_code = 0;        // and its code
  bool count_framed = false;  // H2Session::count_framed()
  uint32_t refused_code = 0;  // we reset it for the peer's fault: the Handler hears this code
  void* owner = nullptr;      // set_stream_owner()

  // Events go to the Handler: streams we opened, and peer streams whose head
  // it got.
  bool known() const { return !refused && (!peer_opened || head_delivered); }

  // The send buffer's room serves a later body (a stream's or a request's
  // replay buffer).
  ~Stream() { SpareStringRooms::give_back(std::move(out)); }
  // head.fields cut to this head's fields, before anyone sees it.
  void end_head_fields() { head.fields.erase(head.fields.begin() + static_cast<ptrdiff_t>(head_fields), head.fields.end()); }
  void empty_head_strings() {
    head.method.clear();
    head.scheme.clear();
    head.authority.clear();
    head.path.clear();
    head.status = 0;
  }
};

// nghttp2's C callbacks. Each returns 0, or NGHTTP2_ERR_CALLBACK_FAILURE to
// stop reading input once the session failed.
struct H2Session::Callbacks {
  static H2Session& self(void* ud) { return *static_cast<H2Session*>(ud); }

  static int on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* ud) {
    H2Session& s = self(ud);
    if (s.failed_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    bool payload_frame =
        hd->type == NGHTTP2_DATA || hd->type == NGHTTP2_HEADERS || hd->type == NGHTTP2_CONTINUATION;
    if (!payload_frame) return 0;
    // A header frame's block was taken out before nghttp2 saw it: its
    // length as received counts.
    const size_t length = hd->type == NGHTTP2_DATA ? hd->length : s.splice_.received_length();
    bool empty = length == 0 && !(hd->type == NGHTTP2_DATA && (hd->flags & NGHTTP2_FLAG_END_STREAM));
    if (!empty) {
      s.empty_frames_in_a_row_ = 0;
      return 0;
    }
    if (++s.empty_frames_in_a_row_ > s.limits_.max_empty_frames) {
      s.fail(kEnhanceYourCalm, "empty frames flood");
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    H2Session& s = self(ud);
    if (s.failed_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    int32_t id = frame->hd.stream_id;
    Stream* st = s.find(id);
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST && s.role_ == Role::server && !st) {
      st = &s.add_stream(id, true);
      ++s.stats_.streams_opened;
      // Above the last-stream-id of our GOAWAY (nghttp2 only checks once
      // the GOAWAY is written): refused, safe for the client to retry.
      if (s.goaway_sent_ && id > s.drain_last_stream_id_) st->refused = true;
    }
    if (!st) return 0;
    bool head = s.role_ == Role::server ? frame->headers.cat == NGHTTP2_HCAT_REQUEST : !st->head_delivered;
    st->block = head ? Stream::Block::head : Stream::Block::trailers;
    st->block_bytes = 0;
    st->oversized = false;
    st->rules.begin_block();
    if (head) {
      // Emptied in place (no Head built and moved in per head); a list left
      // by a 1xx head serves this one.
      st->empty_head_strings();
      if (st->head.fields.capacity() == 0) st->head.fields = take_field_list(s.role_);
      st->head_fields = 0;
      st->head.front_field = s.front_field_ && s.role_ == Role::server;
      if (st->head.front_field) {
        if (st->head.fields.empty()) st->head.fields.emplace_back();
        st->head_fields = 1;
      }
    } else {
      st->trailers.clear();
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    H2Session& s = self(ud);
    if (s.failed_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    int32_t id = frame->hd.stream_id;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
        if (!s.decode_block(id)) return NGHTTP2_ERR_CALLBACK_FAILURE;
        return s.headers_received(id, end);
      case NGHTTP2_DATA:
        if (end) {
          Stream* st = s.find(id);
          if (st && st->known() && !st->local_reset && !st->refused_code && !st->rules.end_stream())
            return s.refuse_malformed(id, *st) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;  // short of content-length
          s.peer_ended(id);
        }
        return 0;
      case NGHTTP2_RST_STREAM: {
        Stream* st = s.find(id);
        if (st && st->peer_opened && !st->head_submitted && !st->refused) {
          s.charge_early_reset();
          if (s.failed_) return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        return 0;
      }
      case NGHTTP2_SETTINGS:
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) {
          // Ours (sent once) took effect: the peer's encoder keeps to our table size now.
          s.splice_.own_settings_acked();
          return 0;
        }
        s.peer_settings_received_ = true;
        s.splice_.peer_settings(frame->settings);
        return 0;
      case NGHTTP2_PING:
        // The answer to announce_drain()'s PING: what the client sent before
        // it read the first GOAWAY is in; the final one can go.
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && s.drain_ping_sent_ && is_drain_ping(frame)) s.drain();
        return 0;
      case NGHTTP2_GOAWAY:
        s.goaway_received_ = true;
        if (s.handler_) s.handler_->on_goaway(frame->goaway.last_stream_id, frame->goaway.error_code);
        return 0;
      default:
        return 0;
    }
  }

  static int on_invalid_frame_recv(nghttp2_session*, const nghttp2_frame*, int lib_error, void* ud) {
    H2Session& s = self(ud);
    if (s.failed_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    // A stream refused for concurrency before our SETTINGS were acknowledged
    // is the peer's fair race, not an error to count.
    if (lib_error == NGHTTP2_ERR_REFUSED_STREAM) return 0;
    if (++s.stats_.stream_errors > s.limits_.max_stream_errors) {
      s.fail(kProtocolError, "too many stream errors");
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t id, const uint8_t* data, size_t len,
                           void* ud) {
    H2Session& s = self(ud);
    // The connection window comes back at once: what a stream holds is
    // bounded by its own window, which only consume() reopens.
    nghttp2_session_consume_connection(session, len);
    if (s.failed_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    Stream* st = s.find(id);
    if (!st || !st->known() || st->local_reset || st->refused_code) {
      nghttp2_session_consume_stream(session, id, len);
      return 0;
    }
    if (!st->rules.data(len)) {  // past content-length, or before the final head
      nghttp2_session_consume_stream(session, id, len);
      return s.refuse_malformed(id, *st) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (s.handler_) s.handler_->on_data(id, data, len);
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* ud) {
    self(ud).finish_stream(id, error_code);
    return 0;
  }

  static int on_frame_send(nghttp2_session* session, const nghttp2_frame* frame, void* ud) {
    H2Session& s = self(ud);
    int32_t id = frame->hd.stream_id;
    if (frame->hd.type == NGHTTP2_HEADERS) {
      s.head_framed(id);
      // A request's HEADERS: nghttp2 has opened the stream (with our user data).
      if (s.unopened_from_ < s.unopened_.size()) s.forget_unopened(id);
    }
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS:
      case NGHTTP2_DATA: {
        // A server that sent a complete response ends the rest of the
        // request with RST_STREAM NO_ERROR (RFC 9113 8.1): the stream stops
        // counting against the limit while the client is still sending.
        Stream* st = s.find(id);
        if (st && s.role_ == Role::server && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
            !nghttp2_session_get_stream_remote_close(session, id)) {
          st->local_reset = true;
          nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR);
        }
        return 0;
      }
      case NGHTTP2_RST_STREAM: {
        // One nghttp2 sent for the peer's protocol error on the stream.
        Stream* st = s.find(id);
        if (st && !st->local_reset && st->peer_opened && !st->head_submitted && !st->refused)
          s.charge_early_reset();
        return 0;
      }
      case NGHTTP2_PING:
        // Its answer counts only from now on (a client cannot end the
        // first step early with a made-up one).
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && is_drain_ping(frame)) s.drain_ping_sent_ = true;
        return 0;
      case NGHTTP2_GOAWAY:
        // announce_drain()'s notice (the largest stream identifier): streams
        // are still taken until drain()'s GOAWAY. Its PING is submitted
        // now, once the notice is written, so that it comes behind it on
        // the wire (nghttp2 writes PINGs ahead of the frames it has queued)
        // and its answer after everything the client sent before it read
        // the notice.
        if (frame->goaway.last_stream_id == kLargestStreamId && frame->goaway.error_code == NGHTTP2_NO_ERROR &&
            !s.goaway_sent_) {
          nghttp2_submit_ping(session, NGHTTP2_FLAG_NONE, kDrainPing);
          return 0;
        }
        s.goaway_sent_ = true;
        if (frame->goaway.error_code != NGHTTP2_NO_ERROR && !s.error_goaway_written_) {
          // The code on the wire is the one reported (nghttp2 may have
          // queued its own before ours).
          s.error_goaway_written_ = true;
          s.goaway_code_ = frame->goaway.error_code;
          if (!s.failed_) {
            // nghttp2 found a connection error itself: the session has failed.
            s.failed_ = true;
            s.close_reason_.assign(reinterpret_cast<const char*>(frame->goaway.opaque_data),
                                   frame->goaway.opaque_data_len);
            if (s.close_reason_.empty()) s.close_reason_ = nghttp2_http2_strerror(frame->goaway.error_code);
          }
        }
        return 0;
      default:
        return 0;
    }
  }

  static int on_frame_not_send(nghttp2_session*, const nghttp2_frame* frame, int, void* ud) {
    H2Session& s = self(ud);
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    s.splice_.drop(frame->hd.stream_id);
    s.head_framed(frame->hd.stream_id);
    return 0;
  }

  // A HEADERS frame of ours is about to be framed: its head is encoded
  // now, in the order the frames go out (the order the peer's decoder
  // reads them in), and flush() splices the block into the frame.
  static int before_frame_send(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    H2Session& s = self(ud);
    if (s.splice_.encode(frame->hd.stream_id)) return 0;
    s.fail(kInternalError, "a head went out without its fields");
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }

  // A head of copied fields: `submit` has nghttp2 queue its frame (0 on
  // success), with an empty field list.
  template <typename Submit>
  static bool submit_copied(H2Session& s, int32_t stream, const FieldList& f, Submit submit) {
    std::unique_ptr<HeldHead> held = HpackSplice::take_held_head();
    held->fields.clear();
    held->keep(f.data(), f.size());
    if (submit() != 0) {
      HpackSplice::give_back_held_head(std::move(held));
      return false;
    }
    s.splice_.hold(stream, std::move(held));
    return true;
  }

  // Submits a head: a request (stream 0: a new one) or the response of
  // `stream`, with a data provider unless it ends the stream. On success
  // `held` keeps the fields of `f` until the frame goes out.
  static bool submit_fields(H2Session& s, int32_t stream, const FieldList& f, bool request, bool end_stream,
                            std::unique_ptr<HeldHead>& held, std::string_view method = {}) {
    held->keep(f.data(), f.size());
    nghttp2_data_provider prov{};
    prov.read_callback = read_data;
    nghttp2_data_provider* pp = end_stream ? nullptr : &prov;
    if (request) {
      // nghttp2 opens the stream when its HEADERS go out: the user data is
      // given here, so the stream is found from the start.
      auto st = std::make_unique<Stream>();
      st->rules = H2MessageRules(H2MessageRules::Side::response);
      st->rules.expect_response_to(method);
      int32_t id = nghttp2_submit_request(s.session_, nullptr, nullptr, 0, pp, st.get());
      if (id <= 0) return false;
      stream = id;
      s.add_stream(id, false, std::move(st));
    } else if (nghttp2_submit_response(s.session_, stream, nullptr, 0, pp) != 0) {
      return false;
    }
    s.splice_.hold(stream, std::move(held));
    Stream* st = s.find(stream);
    st->head_submitted = true;
    st->has_provider = !end_stream;
    st->local_ended = end_stream;
    s.last_submitted_ = stream;
    return true;
  }

  static ssize_t read_data(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length,
                           uint32_t* data_flags, nghttp2_data_source*, void* ud) {
    H2Session& s = self(ud);
    Stream* st = s.find(id);
    if (!st) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    size_t avail = st->out.size() - st->out_off;
    size_t n = std::min(avail, length);
    if (n > 0) {
      std::memcpy(buf, st->out.data() + st->out_off, n);
      if (st->count_framed) {
        if (!s.framed_.empty() && s.framed_.back().first == id) s.framed_.back().second += n;
        else s.framed_.emplace_back(id, n);
      }
    }
    st->out_off += n;
    if (st->out_off == st->out.size()) {
      st->out.clear();
      st->out_off = 0;
    } else if (st->out_off > st->out.size() / 2) {
      st->out.erase(0, st->out_off);
      st->out_off = 0;
    }
    bool drained = st->out.size() == st->out_off;
    if (drained && st->local_ended) {
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (st->trailers_pending) {
        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        st->trailers_pending = false;
        FieldList f(&s.per_message_);
        f.add_fields(st->out_trailers);
        if (!submit_copied(s, id, f, [&] { return nghttp2_submit_trailer(session, id, nullptr, 0); }))
          return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
      }
      return static_cast<ssize_t>(n);
    }
    if (n == 0) {
      st->deferred = true;
      return NGHTTP2_ERR_DEFERRED;
    }
    return static_cast<ssize_t>(n);
  }
};

namespace {

// The sessions alive on this thread: when the last one goes, so do the
// spares kept for them (a worker without HTTP/2 connections keeps none).
thread_local size_t sessions_of_this_thread = 0;

}  // namespace

[[gnu::cold]] void H2Session::free_thread_spares() {
  SpareFieldLists<Role::server>::free_all();
  SpareFieldLists<Role::client>::free_all();
  SpareStringRooms::free_all();
  HpackSplice::free_spare_heads();
}

H2Session::H2Session(Role role, Handler* handler) : H2Session(role, handler, Limits()) {}

H2Session::H2Session(Role role, Handler* handler, const Limits& limits)
    : role_(role),
      handler_(handler),
      limits_(limits),
      splice_(role == Role::server, limits.header_table_bytes),
      reset_tokens_(limits.rapid_reset_burst) {
  static_assert(kPerMessageNames == kPerMessageNameCount);
  static_assert(kRequestTimeout < kTimeLeftNames && kGrpcTimeout < kTimeLeftNames);
  ++sessions_of_this_thread;
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_begin_frame_callback(cb, Callbacks::on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cb, Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, Callbacks::on_invalid_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, Callbacks::on_frame_send);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, Callbacks::on_frame_not_send);
  nghttp2_session_callbacks_set_before_frame_send_callback(cb, Callbacks::before_frame_send);

  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_no_closed_streams(opt, 1);
  // The message rules (RFC 9113 8.1-8.3) are H2MessageRules', checked as
  // each field is stored (nghttp2's own pass over every field cost more,
  // and it sees none): HpackSplice::configure() turns nghttp2's off.
  HpackSplice::configure(opt);
  nghttp2_option_set_max_settings(opt, limits_.max_settings_entries);
  nghttp2_option_set_max_outbound_ack(opt, limits_.max_outbound_acks);
  nghttp2_option_set_max_continuations(opt, limits_.max_continuations);
  // Until the peer's SETTINGS arrive: a client's own streams (they wait for
  // them) within its cap on streams opened; a server opens none (no push).
  nghttp2_option_set_peer_max_concurrent_streams(
      opt, role_ == Role::client ? std::min(limits_.max_concurrent_streams, limits_.max_opened_streams)
                                 : limits_.max_concurrent_streams);
  // nghttp2's own RST_STREAM limiter (its clock) stays behind ours as a
  // backstop: ten times the burst, the same rate.
  nghttp2_option_set_stream_reset_rate_limit(opt, uint64_t(limits_.rapid_reset_burst) * 10,
                                             limits_.rapid_reset_per_second);
  // The worker's pool (nghttp2's default allocator off a worker's thread).
  H2MemoryPool* pool = H2MemoryPool::of_this_thread();
  nghttp2_mem* mem = pool ? pool->mem() : nullptr;
  if (role_ == Role::server) nghttp2_session_server_new3(&session_, cb, this, opt, mem);
  else nghttp2_session_client_new3(&session_, cb, this, opt, mem);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cb);

  std::vector<nghttp2_settings_entry> iv = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.stream_window_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_bytes},
      splice_.table_setting(),
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  if (role_ == Role::client) iv.push_back({NGHTTP2_SETTINGS_ENABLE_PUSH, 0});
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, iv.data(), iv.size());
  if (limits_.connection_window_bytes > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE)
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                          static_cast<int32_t>(limits_.connection_window_bytes));
}

void H2Session::set_request_timeout_name(std::string_view name) {
  std::string& n = per_message_.request_timeout_name;
  n.assign(name);
  for (char& c : n)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
}

H2Session::~H2Session() {
  handler_ = nullptr;
  nghttp2_session_del(session_);  // calls nothing back
  // The streams: after the session, nothing points into them now (the
  // heads splice_ holds go with it).
  while (Stream* st = first_stream_) {
    first_stream_ = st->next;
    delete st;
  }
  if (--sessions_of_this_thread == 0) free_thread_spares();
}

// A stream is found first in found_, a small table by id (the streams of a
// connection have consecutive odd or even ids, so the ones open at once
// mostly sit in slots of their own), then through nghttp2's own stream map
// (its user data points at our Stream): no map of ours to keep up to date
// at each stream's start and end, and a dozen lookups per request cost a
// load and a compare each instead of a walk of nghttp2's hash map (about
// 500 instructions per proxied request). A client stream nghttp2 has not
// opened yet (its HEADERS still queued) is found in unopened_.
// remove_stream() takes a stream out of all of them, and leaves its slot
// saying it is gone: owners ask once more as they let go of it. The last stream
// found is also remembered inline (find()): the callbacks of one frame ask
// for the same stream in a row.
H2Session::Stream* H2Session::find_and_remember(int32_t id) {
  if (id <= 0) return nullptr;
  FoundSlot* slot = found_ ? &found_[found_slot(id)] : nullptr;
  Stream* st = nullptr;
  if (slot && slot->id == id) {
    st = slot->stream;
    if (!st) return nullptr;  // removed (ids are never used again): the owner asking as it lets go
  } else {
    st = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session_, id));
    if (!st) {
      auto it = unopened_at(id);
      if (it == unopened_.end() || it->first != id || !it->second) return nullptr;
      st = it->second;
    }
    if (slot) *slot = FoundSlot{id, st};
  }
  last_found_id_ = id;
  last_found_ = st;
  return st;
}

std::vector<std::pair<int32_t, H2Session::Stream*>>::iterator H2Session::unopened_at(int32_t id) {
  return std::lower_bound(unopened_.begin() + static_cast<ptrdiff_t>(unopened_from_), unopened_.end(), id,
                          [](const std::pair<int32_t, Stream*>& e, int32_t v) { return e.first < v; });
}

void H2Session::forget_unopened(int32_t id) {
  auto it = unopened_at(id);
  if (it == unopened_.end() || it->first != id) return;
  it->second = nullptr;
  // Mostly the first one (HEADERS go out in the order submitted).
  while (unopened_from_ < unopened_.size() && !unopened_[unopened_from_].second) ++unopened_from_;
  if (unopened_from_ == unopened_.size()) {
    unopened_.clear();
    unopened_from_ = 0;
  }
}

H2Session::Stream& H2Session::add_stream(int32_t id, bool peer_opened, std::unique_ptr<Stream> st) {
  if (!st) st = std::make_unique<Stream>();
  st->id = id;
  st->peer_opened = peer_opened;
  Stream& ref = *st;
  // Ours get their user data from submit_request (nghttp2 opens them when
  // their HEADERS go out; ids only grow, unopened_ stays in order); the
  // peer's are open already.
  if (!peer_opened) {
    ++own_streams_;
    unopened_.emplace_back(id, &ref);
  } else {
    nghttp2_session_set_stream_user_data(session_, id, &ref);
  }
  if (!found_) found_ = std::make_unique<FoundSlot[]>(kFoundSlots);  // with a connection's first stream
  found_[found_slot(id)] = FoundSlot{id, &ref};
  Stream* raw = st.release();
  raw->next = first_stream_;
  if (first_stream_) first_stream_->prev = raw;
  first_stream_ = raw;
  ++stream_count_;
  return ref;
}

std::unique_ptr<H2Session::Stream> H2Session::remove_stream(int32_t id) {
  Stream* raw = find(id);
  if (!raw) return nullptr;
  if (raw->prev) raw->prev->next = raw->next;
  else first_stream_ = raw->next;
  if (raw->next) raw->next->prev = raw->prev;
  raw->prev = raw->next = nullptr;
  --stream_count_;
  std::unique_ptr<Stream> st(raw);
  if (!st->peer_opened && unopened_from_ < unopened_.size()) forget_unopened(id);
  if (last_found_id_ == id) {
    last_found_id_ = 0;
    last_found_ = nullptr;
  }
  if (found_[found_slot(id)].id == id) found_[found_slot(id)].stream = nullptr;  // known to be gone
  // nghttp2's stream no longer points at ours, in every case: one we drop
  // while nghttp2 keeps it (close_streams), and one in nghttp2's close
  // callback, which the handler is told of next while nghttp2 still has
  // the stream: a find() of the id from there (set_stream_owner, say)
  // would otherwise get ours back through the user data and remember it
  // after it is freed, for the next frame of that id (a late RST_STREAM).
  nghttp2_session_set_stream_user_data(session_, id, nullptr);
  if (!st->peer_opened) --own_streams_;
  return st;
}

int H2Session::headers_received(int32_t id, bool end) {
  Stream* st = find(id);
  if (!st) return 0;
  Stream::Block block = st->block;
  st->block = Stream::Block::none;
  if (block == Stream::Block::head) st->end_head_fields();
  if (st->oversized) {
    ++stats_.oversized_heads;
    if (stats_.oversized_heads >= limits_.max_oversized_heads) {
      fail(kEnhanceYourCalm, "oversized header lists");
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (role_ == Role::server && block == Stream::Block::head) {
      // Refused: 431 (RFC 9113 10.5.1), the Handler never sees the stream.
      st->refused = true;
      FieldList f;
      f.add(":status", "431");
      f.add("x-onelayer-error", "headers_too_large");
      Callbacks::submit_copied(*this, id, f, [&] { return nghttp2_submit_response(session_, id, nullptr, 0, nullptr); });
      st->head_submitted = true;
      if (handler_) handler_->on_head_refused(id, st->head);
    } else {
      // The Handler hears of it as a reset with this code, even when the
      // head carried END_STREAM and the stream closes before our RST goes.
      st->refused_code = kEnhanceYourCalm;
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, kEnhanceYourCalm);
    }
    return 0;
  }
  if (st->refused && !st->head_submitted) {
    st->local_reset = true;
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, kRefusedStream);
    return 0;
  }
  if (st->refused || st->local_reset || st->refused_code) return 0;
  if (st->malformed || !st->rules.end_block(end)) return refuse_malformed(id, *st) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  if (block == Stream::Block::head) {
    if (role_ == Role::client && st->head.status < 200) {
      if (st->head.status >= 100) return 0;  // 1xx: the final head follows
      // 000-099 (no status class, RFC 9110 15): nghttp2 takes it for a
      // final head and lets DATA follow; the stream is malformed.
      st->refused_code = kProtocolError;
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, kProtocolError);
      return 0;
    }
    st->head_delivered = true;
    if (handler_) handler_->on_head(id, st->head, end);
    st = find(id);
    if (st) {
      // What the Handler left in the list; its strings are moved out or
      // short (a Head() moved in per head cost more than it freed).
      give_back_field_list(role_, st->head.fields);
      if (st->head.fields.capacity() != 0) st->head.fields = Headers();  // over the spares' bounds
    }
  } else if (block == Stream::Block::trailers) {
    if (handler_) handler_->on_trailers(id, st->trailers);
    st = find(id);
  }
  if (end && st) peer_ended(id);
  return 0;
}

void H2Session::peer_ended(int32_t id) {
  Stream* st = find(id);
  if (st) st->peer_end = true;
  if (!st || !st->known() || st->local_reset || st->refused_code) return;
  if (handler_) handler_->on_end(id);
}

bool H2Session::refuse_malformed(int32_t id, Stream& st) {
  ++stats_.malformed_messages;
  st.refused_code = kProtocolError;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, kProtocolError);
  if (++stats_.stream_errors > limits_.max_stream_errors) fail(kProtocolError, "too many stream errors");
  return !failed_;
}

void H2Session::finish_stream(int32_t id, uint32_t error_code) {
  std::unique_ptr<Stream> st = remove_stream(id);
  if (!st || !st->known() || !handler_) return;
  Ending ending(*this, id, st->owner);
  // A server's RST_STREAM NO_ERROR ends a stream cleanly only after its
  // complete response (RFC 9113 8.1: it stops the rest of an upload).
  // Before that it cut the response: a reset like any other code.
  const bool clean = error_code == NGHTTP2_NO_ERROR && (st->peer_end || role_ == Role::server);
  if (st->refused_code) handler_->on_reset(id, st->refused_code);
  else if (st->local_reset || clean) handler_->on_closed(id);
  else handler_->on_reset(id, error_code);
}

void H2Session::charge_early_reset() {
  ++stats_.early_resets;
  if (now_ms_ > reset_refill_ms_) {
    reset_tokens_ = std::min<double>(limits_.rapid_reset_burst,
                                     reset_tokens_ + double(now_ms_ - reset_refill_ms_) *
                                                         limits_.rapid_reset_per_second / 1000.0);
  }
  reset_refill_ms_ = std::max(reset_refill_ms_, now_ms_);
  reset_tokens_ -= 1;
  if (reset_tokens_ < 0) fail(kEnhanceYourCalm, "rapid reset");
}

void H2Session::fail(uint32_t error_code, std::string_view reason) {
  if (failed_) return;
  failed_ = true;
  goaway_code_ = error_code;
  close_reason_ = reason;
  nghttp2_session_terminate_session(session_, error_code);
  close_streams(error_code);
}

// What splice_ passed into nghttp2: a failure of nghttp2's ends the
// session, and a block it did not deliver (its stream was closed or
// refused) is decoded all the same, for the table the peer's next blocks
// refer to.
class H2Session::FramesPassed final : public HpackSplice::Receiver {
 public:
  explicit FramesPassed(H2Session& s) : s_(s) {}
  bool passed(ssize_t rv, int32_t undelivered) override {
    if (rv < 0 && !s_.failed_) s_.fail(fatal_code(static_cast<int>(rv)), fatal_reason(static_cast<int>(rv)));
    if (undelivered != 0 && !s_.failed_) s_.decode_block(undelivered);
    return !s_.failed_;
  }

 private:
  H2Session& s_;
};

bool H2Session::recv(const uint8_t* data, size_t len, uint64_t now_ms) {
  if (failed_) return false;
  now_ms_ = now_ms;
  FramesPassed passed(*this);
  H2HeaderBlockExtractor::Error e = splice_.feed(session_, data, len, passed);
  if (e && !failed_) fail(e.code, e.reason);
  return !failed_;
}

// The decoded fields, onto a stream's head or trailers (none: decoded and dropped).
class H2Session::StreamFields final : public HpackDecoder::Sink {
 public:
  StreamFields(H2Session& s, Stream* st) : s_(s), st_(st) {}
  bool field(std::string_view name, std::string_view value, bool) override {
    return !st_ || s_.take_field(*st_, name, value);
  }

 private:
  H2Session& s_;
  Stream* st_;
};

bool H2Session::decode_block(int32_t id) {
  if (!splice_.holds_block(id)) return !failed_;
  Stream* st = find(id);
  if (st && st->block == Stream::Block::none) st = nullptr;
  StreamFields fields(*this, st);
  switch (splice_.decode(fields)) {
    case HpackDecoder::Result::ok: return !failed_;
    case HpackDecoder::Result::stopped: return false;  // take_field() failed the session
    case HpackDecoder::Result::malformed:
      fail(kCompressionError, "HPACK: " + std::string(splice_.decode_error()));
      return false;
  }
  return false;
}

bool H2Session::take_field(Stream& st, std::string_view n, std::string_view v) {
  st.block_bytes += n.size() + v.size() + 32;
  if (st.block_bytes > limits_.max_header_list_bytes) {
    // The hard cap is at least the limit: only a list over the limit can
    // be over it, and the common field skips working it out.
    uint64_t hard = uint64_t(limits_.max_header_list_bytes) * std::max<uint32_t>(1, limits_.header_list_hard_factor);
    if (st.block_bytes > hard) {
      fail(kEnhanceYourCalm, "header list over the hard cap (HPACK bomb)");
      return false;
    }
    st.oversized = true;
  }
  if (st.oversized || st.malformed) return true;  // keep decoding (the table), keep nothing
  // The rules say what the field is (or that the message is malformed:
  // RST_STREAM once the block is decoded, in headers_received()).
  Head& h = st.head;
  switch (st.rules.field(n, v)) {
    case H2MessageRules::Field::regular:
      if (st.block == Stream::Block::trailers) st.trailers.push_back(Header{std::string(n), std::string(v)});
      else put_field(h.fields, st.head_fields, n, v);  // built in place: no temporary strings moved in
      return true;
    case H2MessageRules::Field::method: overwrite(h.method, v); return true;
    case H2MessageRules::Field::scheme: overwrite(h.scheme, v); return true;
    case H2MessageRules::Field::authority: overwrite(h.authority, v); return true;
    case H2MessageRules::Field::path: overwrite(h.path, v); return true;
    case H2MessageRules::Field::status: h.status = st.rules.status(); return true;
    case H2MessageRules::Field::drop: return true;
    case H2MessageRules::Field::malformed: st.malformed = true; return true;
  }
  return true;
}

size_t H2Session::flush(std::string& out) {
  size_t before = out.size();
  if (!send_broken_) {
    for (;;) {
      const uint8_t* p = nullptr;
      ssize_t n = nghttp2_session_mem_send(session_, &p);
      if (n < 0) {
        send_broken_ = true;
        fail(kInternalError, nghttp2_strerror(static_cast<int>(n)));
        break;
      }
      if (n == 0) break;
      if (splice_.splicing()) {  // the HEADERS frame of the head splice_ encoded
        if (!splice_.splice(session_, p, static_cast<size_t>(n), out)) {
          send_broken_ = true;
          fail(kInternalError, "a head's frame was not as framed");
          break;
        }
        continue;
      }
      out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    }
  }
  // nghttp2 ended the connection itself (a protocol error it found): the
  // streams still open end with it.
  if (failed_ || (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)))
    close_streams(goaway_code_ != kNoError ? goaway_code_ : kCancel);
  return out.size() - before;
}

bool H2Session::want_close() const {
  if (send_broken_) return true;
  bool w = nghttp2_session_want_write(session_);
  if (!nghttp2_session_want_read(session_) && !w) return true;
  return failed_ && !w;
}

uint32_t H2Session::stream_limit() const {
  uint32_t peer = nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  return std::min(peer, limits_.max_opened_streams);
}

bool H2Session::can_submit_request() const {
  if (role_ != Role::client || failed_ || goaway_sent_ || goaway_received_) return false;
  return own_streams_ < stream_limit();
}

bool H2Session::submit_head(int32_t stream, const Head& head, bool request, bool end_stream) {
  FieldList f(&per_message_);
  if (request) f.add_request_line(head.method, head.scheme, head.authority, head.path);
  else f.add_status(head.status);
  f.add_fields(head.fields);
  std::unique_ptr<HeldHead> held = HpackSplice::take_held_head();
  held->fields.clear();
  if (Callbacks::submit_fields(*this, stream, f, request, end_stream, held, head.method)) return true;
  HpackSplice::give_back_held_head(std::move(held));
  return false;
}

int32_t H2Session::submit_request(const Head& head, bool end_stream) {
  if (!can_submit_request()) return 0;
  return submit_head(0, head, true, end_stream) ? last_submitted_ : 0;
}

int32_t H2Session::submit_request(const RequestLine& line, const H2FieldBlock& fields, bool end_stream) {
  return submit_request(line, H2FieldBlock(fields), end_stream);
}

int32_t H2Session::submit_request(const RequestLine& line, H2FieldBlock&& fields, bool end_stream) {
  if (!can_submit_request()) return 0;
  std::unique_ptr<HeldHead> held = HpackSplice::take_held_head();
  held->fields.clear();  // the caller's block gets its room, not its fields
  held->fields.swap(fields);
  held->hold_request_line(line.method, line.scheme, line.authority, line.path);
  FieldList f(&per_message_, true);
  f.add_request_line(held->method, held->scheme, held->authority, held->path);
  f.add_block(held->fields);
  if (!Callbacks::submit_fields(*this, 0, f, true, end_stream, held, held->method)) {
    fields.swap(held->fields);
    HpackSplice::give_back_held_head(std::move(held));
    return 0;
  }
  return last_submitted_;
}

// Server: `stream` is the peer's, known to the Handler, and still waits for
// our (final) head.
bool H2Session::can_answer(int32_t stream) const {
  const Stream* st = find(stream);
  return role_ == Role::server && !failed_ && st && st->known() && !st->head_submitted && !st->local_reset;
}

bool H2Session::submit_response(int32_t stream, const Head& head, bool end_stream) {
  if (!can_answer(stream) || head.status < 200 || head.status > 999) return false;
  return submit_head(stream, head, false, end_stream);
}

bool H2Session::submit_response(int32_t stream, int status, const H2FieldBlock& fields, bool end_stream) {
  return submit_response(stream, status, H2FieldBlock(fields), end_stream);
}

bool H2Session::submit_response(int32_t stream, int status, H2FieldBlock&& fields, bool end_stream) {
  if (!can_answer(stream) || status < 200 || status > 999) return false;
  std::unique_ptr<HeldHead> held = HpackSplice::take_held_head();
  held->fields.clear();  // the caller's block gets its room, not its fields
  held->fields.swap(fields);
  FieldList f(&per_message_, true);
  f.add_status(status);
  f.add_block(held->fields);
  if (!Callbacks::submit_fields(*this, stream, f, false, end_stream, held)) {
    fields.swap(held->fields);
    HpackSplice::give_back_held_head(std::move(held));
    return false;
  }
  return true;
}

bool H2Session::submit_interim(int32_t stream, int status) {
  if (!can_answer(stream) || status < 100 || status > 199 || status == 101) return false;
  FieldList f;
  f.add_status(status);
  return Callbacks::submit_copied(*this, stream, f, [&] {
    return nghttp2_submit_headers(session_, NGHTTP2_FLAG_NONE, stream, nullptr, nullptr, 0, nullptr);
  });
}

void H2Session::resume(Stream& s) {
  if (!s.deferred) return;
  s.deferred = false;
  nghttp2_session_resume_data(session_, s.id);
}

bool H2Session::send_data(int32_t stream, std::string_view bytes) {
  Stream* st = find(stream);
  if (failed_ || !st || !st->has_provider || st->local_ended || st->local_reset) return false;
  if (st->out.empty() && bytes.size() > st->out.capacity()) SpareStringRooms::take(st->out);
  st->out.append(bytes);
  if (!bytes.empty()) resume(*st);
  return true;
}

bool H2Session::send_trailers(int32_t stream, const Headers& trailers) {
  Stream* st = find(stream);
  if (failed_ || !st || !st->has_provider || st->local_ended || st->local_reset) return false;
  st->local_ended = true;
  if (!trailers.empty()) {
    st->trailers_pending = true;
    st->out_trailers = trailers;
  }
  resume(*st);
  return true;
}

bool H2Session::end_stream(int32_t stream) { return send_trailers(stream, Headers()); }

void H2Session::set_stream_owner(int32_t stream, void* owner) {
  if (stream == ending_id_) ending_owner_ = owner;  // e.g. its owner leaves while it ends
  if (Stream* st = find(stream)) st->owner = owner;
}

void* H2Session::stream_owner(int32_t stream) const {
  if (stream == ending_id_) return ending_owner_;  // its on_closed()/on_reset() is running
  const Stream* st = find(stream);
  return st ? st->owner : nullptr;
}

size_t H2Session::queued_bytes(int32_t stream) const {
  const Stream* st = find(stream);
  return st ? st->out.size() - st->out_off : 0;
}

bool H2Session::reset_stream(int32_t stream, uint32_t error_code) {
  Stream* st = find(stream);
  if (failed_ || !st || st->local_reset) return false;
  st->local_reset = true;
  return nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, error_code) == 0;
}

bool H2Session::reset_stream_after_head(int32_t stream, uint32_t error_code) {
  Stream* st = find(stream);
  if (failed_ || !st || st->local_reset) return false;
  if (!st->head_submitted || st->head_framed) return reset_stream(stream, error_code);
  st->local_reset = true;  // no more body: send_data() and send_trailers() refuse
  st->reset_after_head = true;
  st->reset_code = error_code;
  return true;
}

void H2Session::head_framed(int32_t stream) {
  Stream* st = find(stream);
  if (!st) return;
  st->head_framed = true;
  if (!st->reset_after_head) return;
  st->reset_after_head = false;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream, st->reset_code);
}

void H2Session::count_framed(int32_t stream) {
  if (Stream* st = find(stream)) st->count_framed = true;
}

void H2Session::consume(int32_t stream, size_t n) {
  if (failed_ || n == 0) return;
  nghttp2_session_consume_stream(session_, stream, n);
}

bool H2Session::announce_drain() {
  if (role_ != Role::server || failed_ || goaway_sent_ || drain_announced_) return false;
  if (nghttp2_submit_shutdown_notice(session_) != 0) return false;
  drain_announced_ = true;  // its PING follows once the notice is written (on_frame_send)
  return true;
}

void H2Session::drain() {
  if (failed_ || goaway_sent_) return;
  goaway_sent_ = true;
  drain_last_stream_id_ = role_ == Role::server ? nghttp2_session_get_last_proc_stream_id(session_) : 0;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, drain_last_stream_id_, NGHTTP2_NO_ERROR, nullptr, 0);
}

void H2Session::terminate(uint32_t error_code, std::string_view reason) { fail(error_code, reason); }

void H2Session::close_streams(uint32_t error_code) {
  std::vector<int32_t> ids;
  ids.reserve(stream_count_);
  for (const Stream* st = first_stream_; st; st = st->next) ids.push_back(st->id);
  std::sort(ids.begin(), ids.end());
  for (int32_t id : ids) {
    std::unique_ptr<Stream> st = remove_stream(id);
    if (!st || !st->known() || !handler_) continue;
    Ending ending(*this, id, st->owner);
    if (st->local_reset) handler_->on_closed(id);
    else handler_->on_reset(id, error_code);
  }
}

}  // namespace onelayer
