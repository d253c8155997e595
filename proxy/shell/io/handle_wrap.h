// The lifetime of an object that owns libuv handles, after Node's HandleWrap
// (one object may own several handles; a connection owns one socket). States:
//
//   open --close_handles()--> closing --last close callback--> closed (freed)
//
// - adopt(handle) after uv_*_init: the handle's data is the owner, and it is
//   counted; owner_of(handle) gives the owner back.
// - close_handles() is idempotent: the first call closes every handle it is
//   given, later calls do nothing. Entry points check closing() and return.
// - The owner is freed only in the close callback of its last handle, never
//   inside one of its own callbacks: Owner::on_closed() runs first, then
//   `delete` (Owner's destructor must be virtual if it is a base). An owner
//   that adopted no handle is deleted by its creator.
//
// Header-only and depending on libuv alone, so the demo upstream uses it too.
#pragma once

#include <uv.h>

#include <cstdint>

namespace onelayer {

template <class Owner>
class HandleWrap {
 public:
  enum class State : uint8_t { open, closing, closed };

  State handle_state() const { return state_; }
  bool closing() const { return state_ != State::open; }

  // The owner a handle was adopted by.
  template <class H>
  static Owner* owner_of(const H* handle) {
    return static_cast<Owner*>(reinterpret_cast<const uv_handle_t*>(handle)->data);
  }

 protected:
  HandleWrap() = default;
  ~HandleWrap() = default;
  HandleWrap(const HandleWrap&) = delete;
  HandleWrap& operator=(const HandleWrap&) = delete;

  template <class H>
  void adopt(H* handle) {
    reinterpret_cast<uv_handle_t*>(handle)->data = static_cast<Owner*>(this);
    ++open_handles_;
  }

  // Starts closing: false (and nothing done) unless open. `reset_tcp`, when
  // given, is closed with a TCP RST (uv_tcp_close_reset) instead of a FIN.
  template <class... H>
  bool close_handles(uv_tcp_t* reset_tcp, H*... handles) {
    if (state_ != State::open) return false;
    state_ = State::closing;
    if (reset_tcp != nullptr && !uv_is_closing(reinterpret_cast<uv_handle_t*>(reset_tcp)) &&
        uv_tcp_close_reset(reset_tcp, on_handle_closed) != 0) {
      close_one(reinterpret_cast<uv_handle_t*>(reset_tcp));
    }
    (close_one(reinterpret_cast<uv_handle_t*>(handles)), ...);
    return true;
  }

 private:
  static void close_one(uv_handle_t* h) {
    if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
  }

  static void on_handle_closed(uv_handle_t* h) {
    HandleWrap* self = static_cast<Owner*>(h->data);
    if (--self->open_handles_ > 0) return;
    self->finish();
  }

  void finish() {
    state_ = State::closed;
    Owner* owner = static_cast<Owner*>(this);
    owner->on_closed();
    delete owner;
  }

  uint8_t open_handles_ = 0;
  State state_ = State::open;
};

}  // namespace onelayer
