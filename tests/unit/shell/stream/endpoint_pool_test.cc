// EndpointPool without EndpointState: what the client connections call
// keeps the idle pool's two arrays together, and the address lookup is the
// owner's. Connections are never dereferenced here: fake pointers will do.
#include "shell/stream/endpoint_pool.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

using namespace onelayer;

namespace {

class TestPool final : public EndpointPool {
 public:
  int refreshes = 0;
  void refresh_addresses() override { ++refreshes; }
};

Http1ClientConnection* conn(uintptr_t n) { return reinterpret_cast<Http1ClientConnection*>(n * 16); }

}  // namespace

TEST_CASE("EndpointPool: pool, unpool and forget keep each idle connection's client beside it") {
  TestPool p;
  p.pool(conn(1), 11);
  p.pool(conn(2), 22);
  p.pool(conn(3), 33);
  CHECK(p.idle == std::vector<Http1ClientConnection*>{conn(1), conn(2), conn(3)});
  CHECK(p.idle_clients == std::vector<uint64_t>{11, 22, 33});
  p.forget(conn(2));
  CHECK(p.idle == std::vector<Http1ClientConnection*>{conn(1), conn(3)});
  CHECK(p.idle_clients == std::vector<uint64_t>{11, 33});
  p.unpool(0);
  CHECK(p.idle == std::vector<Http1ClientConnection*>{conn(3)});
  CHECK(p.idle_clients == std::vector<uint64_t>{33});
}

TEST_CASE("EndpointPool: forget takes a connection off the lookup's wait list too") {
  TestPool p;
  p.waiting = {conn(4), conn(5)};
  p.forget(conn(4));
  CHECK(p.waiting == std::vector<Http1ClientConnection*>{conn(5)});
  CHECK(p.idle.empty());
}

TEST_CASE("EndpointPool: the address lookup is its owner's, called through the pool") {
  TestPool p;
  EndpointPool& seen_by_a_connection = p;
  seen_by_a_connection.refresh_addresses();
  CHECK(p.refreshes == 1);
}

TEST_CASE("EndpointPool: learn_alpn keeps what the last handshake chose") {
  TestPool p;
  CHECK(p.alpn == EndpointPool::Alpn::unknown);
  p.learn_alpn(EndpointPool::Alpn::h2);
  CHECK(p.alpn == EndpointPool::Alpn::h2);
  p.learn_alpn(EndpointPool::Alpn::http1);
  CHECK(p.alpn == EndpointPool::Alpn::http1);
}
