#include "core/http/message_head.h"

namespace onelayer {

void MessageHead::clear() {
  method.clear();
  target.clear();
  status = 0;
  reason.clear();
  http_major = http_minor = 1;
  headers.clear();  // keeps capacity: no churn on keep-alive connections
  obs_fold = false;
  chunked = false;
  has_content_length = false;
  content_length = 0;
  keep_alive = true;
  checked_by_codec = false;
  end_pending = false;
}

void MessageHead::take_request(MessageHead& from) {
  method.swap(from.method);
  target.swap(from.target);
  headers.swap(from.headers);
  http_major = from.http_major;
  http_minor = from.http_minor;
  obs_fold = from.obs_fold;
  chunked = from.chunked;
  has_content_length = from.has_content_length;
  content_length = from.content_length;
  keep_alive = from.keep_alive;
  checked_by_codec = from.checked_by_codec;
  end_pending = from.end_pending;
}

}  // namespace onelayer
