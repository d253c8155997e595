// TransparentHost without a Worker: the state kept beside each transparent
// connection, and the one host a thread's connections find.
#include "shell/transparent/transparent_host.h"

#include <doctest/doctest.h>

#include <thread>

using namespace onelayer;

namespace {

class TestTransparentHost final : public TransparentHost {
 public:
  explicit TestTransparentHost(TransparentCounters& c) : TransparentHost(c) {}
  const GenerationPtr& generation() override { return gen_; }

 private:
  GenerationPtr gen_;
};

const Http1ServerConnection* conn(uintptr_t n) { return reinterpret_cast<const Http1ServerConnection*>(n * 16); }

}  // namespace

TEST_CASE("TransparentHost: a connection's state is there from add_transparent until forget_transparent") {
  TransparentCounters counters;
  TestTransparentHost h(counters);
  CHECK(h.transparent_state(conn(1)) == nullptr);
  TransparentConn& t = h.add_transparent(conn(1));
  t.idle_ms = 7;
  CHECK(h.transparent_state(conn(1)) == &t);
  CHECK(h.transparent_state(conn(2)) == nullptr);
  CHECK(&h.transparent_counters() == &counters);
  h.forget_transparent(conn(1));
  CHECK(h.transparent_state(conn(1)) == nullptr);
}

TEST_CASE("TransparentHost: each thread finds the host it was given, and only that thread") {
  TransparentCounters counters;
  TestTransparentHost h(counters);
  CHECK(TransparentHost::for_this_thread() == nullptr);
  TransparentHost::set_for_this_thread(&h);
  CHECK(TransparentHost::for_this_thread() == &h);
  TransparentHost* other = &h;
  std::thread([&] { other = TransparentHost::for_this_thread(); }).join();
  CHECK(other == nullptr);
  TransparentHost::set_for_this_thread(nullptr);
  CHECK(TransparentHost::for_this_thread() == nullptr);
}
