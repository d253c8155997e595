// SpareList: objects kept per thread for reuse, at most kMax.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "shell/memory/spare_list.h"

using namespace onelayer;

TEST_CASE("spare list: what is given back is taken again, with its buffer, newest first") {
  using Spares = SpareList<std::string, 4>;
  std::string out;
  CHECK_FALSE(Spares::take(out));  // none kept yet
  std::string a(100, 'a');
  const char* buffer = a.data();
  Spares::give_back(std::move(a));
  Spares::give_back(std::string(50, 'b'));
  CHECK(Spares::kept() == 2);
  REQUIRE(Spares::take(out));
  CHECK(out == std::string(50, 'b'));
  REQUIRE(Spares::take(out));
  CHECK(out.data() == buffer);  // the same allocation came back
  CHECK_FALSE(Spares::take(out));
}

TEST_CASE("spare list: at most kMax are kept, each thread keeps its own") {
  using Spares = SpareList<std::string, 2>;
  for (int i = 0; i < 5; ++i) Spares::give_back(std::string(40, 'x'));
  CHECK(Spares::kept() == 2);
  size_t there = 99;
  std::thread([&] { there = Spares::kept(); }).join();
  CHECK(there == 0);
  std::string out;
  while (Spares::take(out)) {
  }
  CHECK(Spares::kept() == 0);
}
