#include "common/exit_status.h"

#include <doctest/doctest.h>

namespace cairn {

TEST_CASE("the permanent-failure exit status is 2, the status of bad input (SPEC §1)") {
  CHECK(kPermanentFailureExit == 2);
  // The coordinator reads an exit status this way; the CLI reports bad input this way too.
  CHECK(Status::BadInput("x").exit_code() == kPermanentFailureExit);
}

TEST_CASE("trial_exit_status: what would repeat exits kPermanentFailureExit, the rest 1") {
  CHECK(trial_exit_status(Status::Ok()) == 0);
  CHECK(trial_exit_status(Status::BadInput("lr out of range")) == kPermanentFailureExit);
  CHECK(trial_exit_status(Status::NotFound("no such CSV")) == kPermanentFailureExit);
  CHECK(trial_exit_status(Status::Io("disk full")) == 1);
  CHECK(trial_exit_status(Status::Corrupt("checkpoint")) == 1);
  CHECK(trial_exit_status(Status::Failed("rank lost")) == 1);

  CHECK(is_permanent_failure(Status::BadInput("x")));
  CHECK(is_permanent_failure(Status::NotFound("x")));
  CHECK_FALSE(is_permanent_failure(Status::Ok()));
  CHECK_FALSE(is_permanent_failure(Status::Io("x")));
  CHECK_FALSE(is_permanent_failure(Status::Corrupt("x")));
  CHECK_FALSE(is_permanent_failure(Status::Failed("x")));
}

}  // namespace cairn
