// Test hook (tests/README.md "Test hooks"): makes a coordinator `kill -9` land between the
// answers of one gang's round, where adoption must rebuild what the killed coordinator had
// decided (docs/peers.md "Adoption": a sync answered to one rank only, a checkpoint round
// some of whose ranks have their staging directory). With
// CAIRN_TEST_ONE_ANSWER=KIND:STEP (KIND `sync`, `checkpoint_dir` — an agent's staging
// directory — or `checkpoint_ack` — a registered round's acknowledgement), the first round of
// that kind at that step is answered to one rank only (a registered checkpoint of a trial of
// one rank: to none); after the commit that sends that answer,
// the coordinator prints `cairn: test hook: answered one rank's KIND at step STEP; waiting to
// be killed` on standard error and serves nothing more (its launchers' threads still relay
// what it sent), so that a test can see the rank go on and then kill it. It kills itself
// with SIGKILL after 120 s. Once per process; nothing else reads the variable.
//
// CAIRN_TEST_ONE_ANSWER=checkpoint_fetched:STEP holds before the registration of the
// checkpoint at STEP whose every part has been fetched (the agents have removed their
// copies): the line says `answered one rank's checkpoint_fetched at step STEP`, and no rank
// is answered (docs/peers.md "A checkpoint fetched, not yet registered").
//
// CAIRN_TEST_ONE_ANSWER=next_operation:N holds a gang's N-th operation (counted from 1 in the
// attempt: its ranks' N-th next_operation) the same way: the first rank that asks for it gets
// its answer, the others' requests for it are not answered, and the line says `answered one
// rank's next_operation N` (docs/peers.md "A gang's operations").
//
// Thread-safety: the coordinator's loop only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cairn {

// True when the round of `kind` at `step` is the one the hook names (once): the caller
// answers one rank only, and hold_if_testing() then stops the loop.
bool stop_after_one_answer_if_testing(std::string_view kind, int64_t step);

// True once stop_after_one_answer_if_testing said true for this `kind` and `step`: an answer
// of that round decided elsewhere in the same pass of the loop (another machine's part of a
// checkpoint round, staged at the same time) is then not sent either, so only one rank has
// its answer when the coordinator holds.
bool holding_answers_if_testing(std::string_view kind, int64_t step);

// next_operation (above): `decided_now` when the gang's operation number `n` (from 0) was
// just decided for the rank asking, as the first to ask. Returns true when this answer must
// not be sent: the operation is the held one, and the rank is not the first.
bool withhold_operation_if_testing(bool decided_now, size_t n);

// After a commit's answers went out: returns at once unless stop_after_one_answer_if_testing
// said true; then never returns.
void hold_if_testing();

}  // namespace cairn
