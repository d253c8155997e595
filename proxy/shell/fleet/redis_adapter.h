// hiredis's async API on a libuv loop, with bounds on what a server can
// make the process hold.
//
// Modelled on hiredis's adapters/libuv.h (one uv_poll_t per context), with
// two additions a hostile or broken server cannot get past:
// - after every read, the reader's unparsed buffer is checked: hiredis
//   keeps a bulk string's bytes until the whole string arrived, so a
//   "$1000000000" header would otherwise make it buffer a gigabyte. Past
//   kMaxReplyBuffer the owner is told (on_oversize) and drops the link.
// - reply objects are built by functions that refuse strings longer than
//   kMaxString and arrays of more than kMaxElements: hiredis then reports a
//   protocol error and disconnects, so a "*2000000000" header allocates
//   nothing.
#pragma once

#include <cstddef>

#include <hiredis/async.h>
#include <uv.h>

namespace onelayer::fleet {

inline constexpr size_t kMaxReplyBuffer = 64 * 1024;
inline constexpr size_t kMaxString = 4 * 1024;
inline constexpr int kMaxElements = 16;

// Attaches `ac` to `loop`. on_oversize(ac, data) is called (from the poll
// callback, outside any hiredis callback) when the reader holds more than
// kMaxReplyBuffer bytes; the owner must then free the context. Returns
// false (the context is then the caller's to free) when libuv refuses.
bool redis_attach(redisAsyncContext* ac, uv_loop_t* loop, void (*on_oversize)(redisAsyncContext*, void*),
                  void* data);

}  // namespace onelayer::fleet
