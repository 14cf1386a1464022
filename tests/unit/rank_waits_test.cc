#include "engine/coordinator/rank_waits.h"

#include <doctest/doctest.h>

namespace cairn {

namespace {

using Clock = RankWait::Clock;

RankWait in(RankCall call, int64_t step = 0, std::string detail = "",
            Clock::time_point since = Clock::time_point{}) {
  RankWait w;
  w.enter(call, step, std::move(detail), since);
  w.last_step = step;
  return w;
}

}  // namespace

TEST_CASE("a gang whose ranks wait for each other in different calls is deadlocked") {
  // Rank 0 checkpoints at 4 without checkpoint_due(4); rank 1 waits for it in checkpoint_due(4).
  RankWait zero = in(RankCall::kCheckpoint, 4);
  RankWait one = in(RankCall::kSync, 4);
  one.left_through = 3;
  auto line = gang_deadlock({zero, one});
  REQUIRE(line);
  CHECK(*line == "ranks deadlocked: rank 0 in checkpoint(4), rank 1 in checkpoint_due(4)");

  // One rank one step ahead of the other in checkpoint_due.
  CHECK(gang_deadlock({in(RankCall::kSync, 4), in(RankCall::kSync, 6)}));
  // Both wait for a rendezvous key no one will set.
  CHECK(*gang_deadlock({in(RankCall::kKvGet, 0, "a"), in(RankCall::kKvGet, 0, "b")}) ==
        "ranks deadlocked: rank 0 in kv_get(a), rank 1 in kv_get(b)");
}

TEST_CASE("a rank that exited cannot answer a sync: the others are deadlocked") {
  RankWait gone;
  gone.enter(RankCall::kExited, 0, "", {});
  auto line = gang_deadlock({in(RankCall::kSync, 8), gone});
  REQUIRE(line);
  CHECK(*line == "ranks deadlocked: rank 0 in checkpoint_due(8), rank 1 exited");
  // Every rank ended: the trial is over, not deadlocked.
  CHECK_FALSE(gang_deadlock({gone, gone}));
}

TEST_CASE("no deadlock while a rank runs its own code or the searcher may answer") {
  CHECK_FALSE(gang_deadlock({in(RankCall::kCheckpoint, 4), RankWait{}}));
  CHECK_FALSE(gang_deadlock({in(RankCall::kNextOperation), in(RankCall::kSync, 4)}));
  CHECK_FALSE(gang_deadlock({in(RankCall::kSync, 4), in(RankCall::kSync, 4)}));
  CHECK_FALSE(gang_deadlock({in(RankCall::kSync, 4)}));  // one rank: nothing to agree on
  // Another rank's next_operation waits for rank 0's, which decides it: answerable once rank 0
  // asks too, or has ended.
  CHECK_FALSE(gang_deadlock({in(RankCall::kNextOperation), in(RankCall::kNextOperation)}));
  CHECK_FALSE(gang_deadlock({RankWait{}, in(RankCall::kNextOperation)}));
}

TEST_CASE("a rank waiting for rank 0's next_operation while rank 0 waits for it is deadlocked") {
  auto line = gang_deadlock({in(RankCall::kSync, 4), in(RankCall::kNextOperation)});
  REQUIRE(line);
  CHECK(*line == "ranks deadlocked: rank 0 in checkpoint_due(4), rank 1 in operations()");
}

TEST_CASE("a checkpoint is whole once every rank ended it or left it") {
  // Chief-only: rank 0 ended checkpoint(4); rank 1 called should_preempt instead.
  RankWait skip = in(RankCall::kCheckpointSkip, 4, "should_preempt");
  skip.left_through = 4;
  CHECK(left_checkpoint(skip, 4));
  CHECK_FALSE(gang_deadlock({in(RankCall::kCheckpoint, 4), skip}));  // cairn answers both
  CHECK(describe_rank_wait(skip) == "should_preempt(4)");
  // A rank that made a report after checkpoint_due(4) has left checkpoint 4 too.
  RankWait reported;
  reported.reached(4);
  CHECK_FALSE(left_checkpoint(reported, 4));
  reported.moved_on();
  CHECK(left_checkpoint(reported, 4));
  CHECK_FALSE(left_checkpoint(reported, 5));
  // A rank in the Python SDK's barrier() has left every checkpoint of a training step.
  RankWait barrier = in(RankCall::kSync, kBarrierBase + 3);
  barrier.reached(kBarrierBase + 3);
  CHECK(left_checkpoint(barrier, 1000000));
  CHECK(describe_rank_wait(barrier) == "barrier(3)");
}

TEST_CASE("rank_wait_timeout names the waiting rank, its call and the rank outside") {
  const Clock::time_point t0 = Clock::now();
  RankWait zero = in(RankCall::kCheckpoint, 4, "", t0);
  std::vector<RankWait> waits{zero, RankWait{}};
  CHECK_FALSE(rank_wait_expired(waits, std::chrono::seconds(5), t0 + std::chrono::seconds(4)));
  CHECK_FALSE(rank_wait_expired(waits, std::chrono::seconds(0), t0 + std::chrono::hours(1)));
  auto line = rank_wait_expired(waits, std::chrono::seconds(5), t0 + std::chrono::seconds(6));
  REQUIRE(line);
  CHECK(*line ==
        "rank 0 waited 5 s in checkpoint(4) while rank 1 stayed outside cairn "
        "(rank_wait_timeout)");
  // Waiting for the searcher is not waiting on the gang.
  std::vector<RankWait> searcher{in(RankCall::kNextOperation, 0, "", t0), RankWait{}};
  CHECK_FALSE(rank_wait_expired(searcher, std::chrono::seconds(5), t0 + std::chrono::hours(1)));
}

}  // namespace cairn
