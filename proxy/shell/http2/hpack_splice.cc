#include "shell/http2/hpack_splice.h"

#include <algorithm>

#include "core/h2wire/h2_frame_header.h"
#include "shell/memory/spare_list.h"
#include "shell/memory/string_overwrite.h"

namespace onelayer {

namespace {

// Our SETTINGS_MAX_FRAME_SIZE: the protocol's default (none is sent).
constexpr uint32_t kMaxFrameBytes = 16384;

// Every head submitted in one loop iteration is held until the flush after
// it: room for a burst of them.
constexpr size_t kSpareHeldHeads = 1024;
constexpr size_t kSpareHeldBytes = 8 * 1024;  // a head that held more is freed, not kept
using SpareHeldHeads = SpareList<std::unique_ptr<HpackSplice::HeldHead>, kSpareHeldHeads>;

void put_frame_header(std::string& out, size_t length, uint8_t type, uint8_t flags, int32_t stream) {
  uint8_t hd[H2FrameHeader::kBytes];
  H2FrameHeader{static_cast<uint32_t>(length), type, flags, stream}.write(hd);
  out.append(reinterpret_cast<const char*>(hd), sizeof hd);
}

}  // namespace

void HpackSplice::HeldHead::keep(const nghttp2_nv* f, size_t n) {
  list.assign(f, f + n);
  size_t need = 0;
  for (const nghttp2_nv& nv : list) {
    if (!(nv.flags & NGHTTP2_NV_FLAG_NO_COPY_NAME)) need += nv.namelen;
    if (!(nv.flags & NGHTTP2_NV_FLAG_NO_COPY_VALUE)) need += nv.valuelen;
  }
  copies.clear();
  if (need == 0) return;
  copies.reserve(need);
  for (nghttp2_nv& nv : list) {
    if (!(nv.flags & NGHTTP2_NV_FLAG_NO_COPY_NAME)) nv.name = copy(nv.name, nv.namelen);
    if (!(nv.flags & NGHTTP2_NV_FLAG_NO_COPY_VALUE)) nv.value = copy(nv.value, nv.valuelen);
  }
}

uint8_t* HpackSplice::HeldHead::copy(const uint8_t* p, size_t n) {
  size_t at = copies.size();
  copies.append(reinterpret_cast<const char*>(p), n);
  return reinterpret_cast<uint8_t*>(copies.data() + at);
}

void HpackSplice::HeldHead::hold_request_line(std::string_view m, std::string_view s, std::string_view a,
                                              std::string_view p) {
  overwrite(method, m);
  overwrite(scheme, s);
  overwrite(authority, a);
  overwrite(path, p);
}

std::unique_ptr<HpackSplice::HeldHead> HpackSplice::take_held_head() {
  std::unique_ptr<HeldHead> h;
  if (!SpareHeldHeads::take(h)) h = std::make_unique<HeldHead>();
  return h;
}

void HpackSplice::give_back_held_head(std::unique_ptr<HeldHead> h) {
  if (h->bytes() <= kSpareHeldBytes) SpareHeldHeads::give_back(std::move(h));
}

void HpackSplice::free_spare_heads() { SpareHeldHeads::free_all(); }

HpackSplice::HpackSplice(bool server, uint32_t table_bytes)
    : decode_table_bytes_(std::max(table_bytes, kLeastDecodeTableBytes)),
      encoder_(table_bytes),
      extractor_(server, kMaxFrameBytes) {}

void HpackSplice::configure(nghttp2_option* opt) {
  // nghttp2 sees no field, so it cannot check a message's (RFC 9113
  // 8.1-8.3: a request without :method would be refused): the session's
  // H2MessageRules do, on the decoded fields.
  nghttp2_option_set_no_http_messaging(opt, 1);
  // Our heads are encoded by encoder_ (encode()): nghttp2 frames them with
  // empty field lists, and its own encoder keeps no table.
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 0);
}

void HpackSplice::peer_settings(const nghttp2_settings& settings) {
  for (size_t i = 0; i < settings.niv; ++i) {
    if (settings.iv[i].settings_id == NGHTTP2_SETTINGS_HEADER_TABLE_SIZE) encoder_.peer_table_limit(settings.iv[i].value);
  }
}

// nghttp2 sends a stream's HEADERS frames in the order they were submitted,
// and mostly all frames so: the head asked for is nearly always the first.
std::unique_ptr<HpackSplice::HeldHead> HpackSplice::take_unsent(int32_t stream) {
  std::unique_ptr<HeldHead> head;
  for (size_t i = unsent_from_; i < unsent_heads_.size(); ++i) {
    if (unsent_heads_[i].first != stream || !unsent_heads_[i].second) continue;
    head = std::move(unsent_heads_[i].second);
    break;
  }
  while (unsent_from_ < unsent_heads_.size() && !unsent_heads_[unsent_from_].second) ++unsent_from_;
  if (unsent_from_ == unsent_heads_.size()) {
    unsent_heads_.clear();
    unsent_from_ = 0;
  }
  return head;
}

void HpackSplice::drop(int32_t stream) {
  if (std::unique_ptr<HeldHead> head = take_unsent(stream)) give_back_held_head(std::move(head));
}

bool HpackSplice::encode(int32_t stream) {
  std::unique_ptr<HeldHead> head = take_unsent(stream);
  if (!head) return false;
  block_.clear();
  encoder_.begin_block(block_);
  for (const nghttp2_nv& nv : head->list) {
    encoder_.field(std::string_view(reinterpret_cast<const char*>(nv.name), nv.namelen),
                   std::string_view(reinterpret_cast<const char*>(nv.value), nv.valuelen),
                   nv.flags & NGHTTP2_NV_FLAG_NO_INDEX, block_);
  }
  give_back_held_head(std::move(head));
  block_stream_ = stream;
  return true;
}

// `p`/`n`: the HEADERS frame nghttp2 framed for the head encode() just
// encoded, with an empty field list: its header, priority fields if
// flagged, and whatever nghttp2's own encoder put in (a table size update at
// most; dropped).
bool HpackSplice::splice(nghttp2_session* session, const uint8_t* p, size_t n, std::string& out) {
  if (n < H2FrameHeader::kBytes) return false;
  const auto [length, type, flags, stream] = H2FrameHeader::read(p);
  if (type != NGHTTP2_HEADERS) return false;
  const size_t priority = (flags & NGHTTP2_FLAG_PRIORITY) ? 5 : 0;
  if (length != n - H2FrameHeader::kBytes || stream != block_stream_ || (flags & NGHTTP2_FLAG_PADDED) || length < priority) return false;
  const size_t max_frame = nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_FRAME_SIZE);
  std::string_view block = block_;
  size_t first = std::min(block.size(), max_frame - priority);
  bool last = first == block.size();
  uint8_t first_flags = last ? (flags | NGHTTP2_FLAG_END_HEADERS) : (flags & ~NGHTTP2_FLAG_END_HEADERS);
  put_frame_header(out, priority + first, NGHTTP2_HEADERS, first_flags, stream);
  out.append(reinterpret_cast<const char*>(p) + H2FrameHeader::kBytes, priority);
  out.append(block.substr(0, first));
  block.remove_prefix(first);
  while (!block.empty()) {
    size_t part = std::min(block.size(), max_frame);
    last = part == block.size();
    put_frame_header(out, part, NGHTTP2_CONTINUATION, last ? NGHTTP2_FLAG_END_HEADERS : 0, stream);
    out.append(block.substr(0, part));
    block.remove_prefix(part);
  }
  block_stream_ = 0;
  return true;
}

// The extractor's output: frames into nghttp2, blocks kept for decode()
// (when nghttp2 delivers the frame that ends them).
class HpackSplice::FramingInput final : public H2HeaderBlockExtractor::Sink {
 public:
  FramingInput(HpackSplice& splice, nghttp2_session* session, Receiver& receiver)
      : splice_(splice), session_(session), receiver_(receiver) {}
  bool pass(const uint8_t* data, size_t n, uint32_t received_length) override {
    splice_.received_length_ = received_length;
    ssize_t rv = nghttp2_session_mem_recv(session_, data, n);
    const int32_t undelivered = splice_.block_in_waiting_ ? splice_.block_in_stream_ : 0;
    return receiver_.passed(rv, undelivered);
  }
  void block(int32_t stream, std::string_view block) override {
    splice_.block_in_ = block;
    splice_.block_in_stream_ = stream;
    splice_.block_in_waiting_ = true;
  }

 private:
  HpackSplice& splice_;
  nghttp2_session* session_;
  Receiver& receiver_;
};

H2HeaderBlockExtractor::Error HpackSplice::feed(nghttp2_session* session, const uint8_t* data, size_t n,
                                                Receiver& receiver) {
  FramingInput input(*this, session, receiver);
  return extractor_.feed(data, n, input);
}

}  // namespace onelayer
