#include "core/retry/replay_body.h"

#include <doctest/doctest.h>

#include <string>

using namespace onelayer;

TEST_CASE("BodyWithinLimitIsReplayedWholeToEveryAttempt") {
  ReplayBody b(10, true);
  CHECK_FALSE(b.count(4));
  b.hold("abcd");  // came before the first attempt was connected
  CHECK(b.pending() == "abcd");
  b.sent_pending();  // went with the head
  CHECK(b.pending().empty());
  CHECK_FALSE(b.count(3));
  b.sent_through("efg");  // straight to the connected attempt
  CHECK(b.pending().empty());
  CHECK(b.queued() == 0);  // the replay copy is no backlog
  b.rewind();              // a retry
  CHECK(b.pending() == "abcdefg");
  CHECK(b.replayable());
  CHECK(b.received() == 7);
}

TEST_CASE("BodyReachingExactlyTheLimitStaysReplayable") {
  ReplayBody b(5, true);
  CHECK_FALSE(b.count(5));
  b.sent_through("12345");
  CHECK(b.replayable());
  b.rewind();
  CHECK(b.pending() == "12345");
}

TEST_CASE("BodyOneByteOverTheLimitDropsWhatWasSentAndKeepsOnlyUnsentBytes") {
  ReplayBody b(5, true);
  CHECK_FALSE(b.count(3));
  b.sent_through("abc");
  CHECK_FALSE(b.count(2));
  b.hold("de");  // the attempt was not ready for these
  CHECK(b.count(1));  // 6 > 5: no longer replayable, said once
  CHECK_FALSE(b.replayable());
  CHECK(b.pending() == "de");  // "abc" went and is not kept
  b.hold("f");
  CHECK(b.queued() == 3);
  b.sent_pending();
  CHECK(b.pending().empty());
  CHECK(b.queued() == 0);
  CHECK_FALSE(b.count(100));  // only the crossing is reported
  b.sent_through("xyz");      // streamed bytes are not kept
  CHECK(b.queued() == 0);
  CHECK(b.received() == 106);
}

TEST_CASE("DeclaredLengthOverTheLimitIsNeverReplayable") {
  ReplayBody b(5, false);
  CHECK_FALSE(b.replayable());
  CHECK_FALSE(b.count(2));
  b.hold("ab");
  CHECK(b.queued() == 2);
  b.sent_pending();
  b.rewind();
  CHECK(b.pending().empty());
}

TEST_CASE("BodyRoomGoesFromOneBodyToTheNextWithoutItsBytes") {
  ReplayBody first(100, true);
  CHECK_FALSE(first.count(40));
  first.sent_through(std::string(40, 'a'));
  std::string room = first.take_room();
  CHECK(room.empty());
  CHECK(room.capacity() >= 40);
  CHECK(first.pending().empty());
  const char* where = room.data();

  ReplayBody second(100, true);
  second.give_room(std::move(room));
  CHECK_FALSE(second.count(3));
  second.sent_through("xyz");
  second.rewind();
  CHECK(second.pending() == "xyz");
  CHECK(second.pending().data() == where);  // the first body's room

  std::string more(64, 'm');
  second.give_room(std::move(more));  // holds bytes already: left alone
  second.rewind();
  CHECK(second.pending() == "xyz");
  CHECK(second.pending().data() == where);
}
