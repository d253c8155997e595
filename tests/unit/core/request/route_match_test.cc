#include "core/request/route_match.h"

#include <doctest/doctest.h>

using namespace onelayer;

namespace {

Route make_route(std::string name, std::string host, std::string prefix,
                 std::vector<std::string> methods = {}) {
  Route r;
  r.name = std::move(name);
  r.match.host = std::move(host);
  r.match.path_prefix = std::move(prefix);
  r.match.methods = std::move(methods);
  return r;
}

const char* matched(const Listener& l, std::string_view host, std::string_view path,
                    std::string_view method = "GET") {
  const Route* r = match_route(l, host, path, method);
  return r ? r->name.c_str() : "(none)";
}

}  // namespace

TEST_CASE("match_route: the first matching route wins, in file order") {
  Listener l;
  l.routes = {make_route("items", "", "/items"), make_route("all", "", "/"),
              make_route("never", "", "/items/special")};
  CHECK(std::string(matched(l, "x", "/items/special")) == "items");
  CHECK(std::string(matched(l, "x", "/other")) == "all");
}

TEST_CASE("match_route: no matching route gives nullptr") {
  Listener l;
  l.routes = {make_route("items", "", "/items")};
  CHECK(match_route(l, "x", "/other", "GET") == nullptr);
  Listener empty;
  CHECK(match_route(empty, "x", "/", "GET") == nullptr);
}

TEST_CASE("match_route: exact host ignores case and port") {
  Listener l;
  l.routes = {make_route("inv", "inventory", "/")};
  CHECK(std::string(matched(l, "inventory", "/")) == "inv");
  CHECK(std::string(matched(l, "Inventory:8080", "/")) == "inv");
  CHECK(std::string(matched(l, "INVENTORY.", "/")) == "inv");
  CHECK(std::string(matched(l, "inventory.svc", "/")) == "(none)");
  CHECK(std::string(matched(l, "xinventory", "/")) == "(none)");
  CHECK(std::string(matched(l, "", "/")) == "(none)");
}

TEST_CASE("match_route: *.suffix matches subdomains but not the bare suffix") {
  Listener l;
  l.routes = {make_route("wild", "*.svc.local", "/")};
  CHECK(std::string(matched(l, "a.svc.local", "/")) == "wild");
  CHECK(std::string(matched(l, "a.b.SVC.local:80", "/")) == "wild");
  CHECK(std::string(matched(l, "svc.local", "/")) == "(none)");
  CHECK(std::string(matched(l, ".svc.local", "/")) == "(none)");
  CHECK(std::string(matched(l, "asvc.local", "/")) == "(none)");
}

TEST_CASE("match_route: bracketed IPv6 Host headers match with or without port") {
  Listener l;
  l.routes = {make_route("v6", "[::1]", "/")};
  CHECK(std::string(matched(l, "[::1]:80", "/")) == "v6");
  CHECK(std::string(matched(l, "[::1]", "/")) == "v6");
  CHECK(std::string(matched(l, "[::2]:80", "/")) == "(none)");
}

TEST_CASE("match_route: empty route host matches any Host, including none") {
  Listener l;
  l.routes = {make_route("any", "", "/")};
  CHECK(std::string(matched(l, "", "/")) == "any");
  CHECK(std::string(matched(l, "whatever:1", "/")) == "any");
}

TEST_CASE("match_route: path prefix is byte-wise, case-sensitive and ignores the query") {
  Listener l;
  l.routes = {make_route("items", "", "/items")};
  CHECK(std::string(matched(l, "", "/items")) == "items");
  CHECK(std::string(matched(l, "", "/items/7")) == "items");
  CHECK(std::string(matched(l, "", "/itemsX")) == "items");
  CHECK(std::string(matched(l, "", "/items?x=1")) == "items");
  CHECK(std::string(matched(l, "", "/ite?ms")) == "(none)");
  CHECK(std::string(matched(l, "", "/ite#ms")) == "(none)");
  CHECK(std::string(matched(l, "", "/Items")) == "(none)");
  CHECK(std::string(matched(l, "", "/item")) == "(none)");
}

TEST_CASE("match_route: method set is exact and upper case, empty set matches any method") {
  Listener l;
  l.routes = {make_route("read", "", "/", {"GET", "HEAD"}), make_route("rest", "", "/")};
  CHECK(std::string(matched(l, "", "/", "GET")) == "read");
  CHECK(std::string(matched(l, "", "/", "HEAD")) == "read");
  CHECK(std::string(matched(l, "", "/", "get")) == "rest");
  CHECK(std::string(matched(l, "", "/", "POST")) == "rest");
}

TEST_CASE("match_route: host, path and method must all match") {
  Listener l;
  l.routes = {make_route("all3", "api", "/v1", {"POST"})};
  CHECK(std::string(matched(l, "api", "/v1/x", "POST")) == "all3");
  CHECK(std::string(matched(l, "web", "/v1/x", "POST")) == "(none)");
  CHECK(std::string(matched(l, "api", "/v2/x", "POST")) == "(none)");
  CHECK(std::string(matched(l, "api", "/v1/x", "GET")) == "(none)");
}

TEST_CASE("host_without_port: strips port, brackets and one trailing dot, keeps case") {
  CHECK(host_without_port("Example.com:80") == "Example.com");
  CHECK(host_without_port("example.com.") == "example.com");
  CHECK(host_without_port("[::1]:80") == "::1");
  CHECK(host_without_port("[::1]") == "::1");
  CHECK(host_without_port("") == "");
}

TEST_CASE("match_route: OPTIONS * goes to the first catch-all route, never to a narrower prefix") {
  Listener l;
  l.routes = {make_route("items", "", "/items"), make_route("opts-host", "other", "/"),
              make_route("all", "", "/")};
  CHECK(std::string(matched(l, "x", "*", "OPTIONS")) == "all");
  CHECK(std::string(matched(l, "other", "*", "OPTIONS")) == "opts-host");
  Listener narrow;
  narrow.routes = {make_route("items", "", "/items")};
  CHECK(match_route(narrow, "x", "*", "OPTIONS") == nullptr);
}

TEST_CASE("match_route: a route with callers matches only those verified callers and decides for them") {
  Listener l;
  Route write = make_route("orders-write", "", "/orders", {"POST"});
  write.match.callers = {"spiffe://cluster/ns/web/sa/frontend"};
  Route team = make_route("team", "", "/team");
  team.match.callers = {"spiffe://cluster/ns/team/*"};
  l.routes = {write, team, make_route("all", "", "/")};
  bool refused = true;
  const Route* r = match_route(l, "", "/orders/1", "POST", nullptr, "spiffe://cluster/ns/web/sa/frontend", &refused);
  REQUIRE(r != nullptr);
  CHECK(r->name == "orders-write");
  CHECK_FALSE(refused);
  // Another caller, or none: the first route for the request decides, the
  // catch-all after it is not tried.
  CHECK(match_route(l, "", "/orders/1", "POST", nullptr, "spiffe://cluster/ns/orders/sa/api", &refused) == nullptr);
  CHECK(refused);
  CHECK(match_route(l, "", "/orders/1", "POST", nullptr, "", &refused) == nullptr);
  CHECK(refused);
  // A request that route does not match goes on as before.
  r = match_route(l, "", "/orders/1", "GET", nullptr, "spiffe://cluster/ns/orders/sa/api", &refused);
  REQUIRE(r != nullptr);
  CHECK(r->name == "all");
  CHECK_FALSE(refused);
  r = match_route(l, "", "/team/x", "GET", nullptr, "spiffe://cluster/ns/team/sa/a", &refused);
  REQUIRE(r != nullptr);
  CHECK(r->name == "team");
  // Without the out-parameter the answer is the same.
  CHECK(match_route(l, "", "/team/x", "GET", nullptr, "spiffe://cluster/ns/other/sa/a") == nullptr);
}
