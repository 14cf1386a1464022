// One machine's part of a data-parallel trial's checkpoint round when that machine is an
// agent (docs/peers.md "A checkpoint round over machines"): its ranks write into a directory
// staged on their own machine, which travels to the coordinator's store when the round is
// whole (checkpoint_transfers.h, a round job). Held in the round (trial_state.h RankRound)
// while it is open; the coordinator's loop alone touches it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "peer/checkpoint_client.h"

namespace cairn {

struct RemoteRoundPart {
  AgentEndpoint agent;
  std::string machine;   // its name in messages ("10.0.0.2:7070")
  std::string path;      // the directory staged on the agent, once it answered
  bool staging = false;  // a stage request is on the wire
  std::string failure;   // the agent could not stage it: the round fails
  // Ranks whose checkpoint_begin waits for the directory.
  struct Waiter {
    int fd = -1;  // the rank's connection
    Json seq;     // the request's
    int rank = 0;
  };
  std::vector<Waiter> waiting;
  // Ranks of this machine whose directory a killed coordinator staged and named to them
  // before this one adopted the gang (coordinator_replayed_answers.cc), where it is not
  // `path` (the rank got it before another rank of this machine got `path` here): each such
  // directory is one more part of this machine.
  std::map<int, std::string> rank_paths;
};

}  // namespace cairn
