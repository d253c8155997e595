#include "core/transparent/destination_table.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace onelayer;

namespace {
struct Entry {
  int id = 0;
  int users = 0;
};
}  // namespace

TEST_CASE("DestinationTable: beyond the cap the least recently used entry goes, a found one stays") {
  DestinationTable<Entry> t(3);
  std::vector<int> gone;
  auto in_use = [](const Entry& e) { return e.users > 0; };
  auto evicted = [&](Entry& e) { gone.push_back(e.id); };
  t.insert("a", Entry{1}, in_use, evicted);
  t.insert("b", Entry{2}, in_use, evicted);
  t.insert("c", Entry{3}, in_use, evicted);
  REQUIRE(t.find("a"));  // a is now the most recent: b is the oldest
  t.insert("d", Entry{4}, in_use, evicted);
  CHECK(gone == std::vector<int>{2});
  CHECK(t.size() == 3);
  CHECK(t.find("b") == nullptr);
  CHECK(t.find("a")->id == 1);
  CHECK(t.find("d")->id == 4);
}

TEST_CASE("DestinationTable: an entry in use is skipped and goes once a later insert finds it free") {
  DestinationTable<Entry> t(2);
  std::vector<int> gone;
  auto in_use = [](const Entry& e) { return e.users > 0; };
  auto evicted = [&](Entry& e) { gone.push_back(e.id); };
  t.insert("a", Entry{1, 1}, in_use, evicted);
  t.insert("b", Entry{2, 1}, in_use, evicted);
  t.insert("c", Entry{3}, in_use, evicted);
  CHECK(gone.empty());
  CHECK(t.size() == 3);  // both older ones are in use; the new one is never its own victim
  t.find("a")->users = 0;  // found: a is now the most recent (c, b older)
  t.insert("d", Entry{4}, in_use, evicted);
  // Over the cap by two, oldest first: b is still in use, c goes, then a.
  CHECK(gone == std::vector<int>{3, 1});
  CHECK(t.size() == 2);
}

TEST_CASE("DestinationTable: thousands of distinct destinations keep the table at its cap") {
  DestinationTable<Entry> t;  // the documented default
  CHECK(t.cap() == 1024);
  size_t evictions = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string key = "10.201." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ":80";
    if (!t.find(key)) t.insert(key, Entry{i}, [](const Entry&) { return false; }, [&](Entry&) { ++evictions; });
    CHECK(t.size() <= t.cap());
  }
  CHECK(t.size() == 1024);
  CHECK(evictions == 20000 - 1024);
  // The most recent 1024 are the ones kept.
  CHECK(t.find("10.201.79.249:80") != nullptr);
  CHECK(t.find("10.201.0.0:80") == nullptr);
}
