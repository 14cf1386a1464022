// A gang's operations across a coordinator's `kill -9` (docs/peers.md "A gang's operations").
// The ranks of a data-parallel trial get the same sequence of operations: the n-th
// next_operation of any rank is answered with what was decided when the first rank asked its
// n-th (Trial::operations, Rank::operations_asked; docs/protocol.md "Multi-rank trials").
// Each rank asks when it gets there, so a killed coordinator may have answered the n-th to
// some ranks only, and the ranks have had different numbers of answers. The coordinator that
// adopts the gang (coordinator_adoption.cc) learns from each rank's agent how many answers the
// rank got and the latest of them (session_adopted's "operations", peer/session_adoption.h
// AnsweredOperations), and rebuilds the sequence from there, so that:
// - a rank that had not had its n-th answer gets the one the others got, whatever the searcher
//   decided since (not the searcher's state as the new coordinator finds it);
// - a rank that had its n-th gets the (n+1)-th next, not its n-th again (a new coordinator
//   counts from 0: before, the rank that was ahead was given the others' n-th answer for its
//   (n+1)-th request, an operation it had already done).
// It is learnt from session_adopted, before any rank's stream is replayed, so no rank's
// replayed request can be answered before every rank's account is known.
//
// Everything here is untrusted input from an agent: bounded, checked, refused with one line.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// What an agent says of the operations one rank was given in its attempt.
struct KeptOperations {
  static constexpr size_t kMaxLatest = 64;  // an agent keeps 8; more is refused
  int64_t count = 0;                        // answers given, the latest included
  std::vector<Json> latest;  // the last answers, oldest first: {"length": L} or {"done": true}
};

// The "operations" field of a session_adopted rank: nullopt when absent (an agent that
// predates it); a failure (one line) when it is not {"count": N >= 0, "latest": [...]} with at
// most kMaxLatest operations, no more than N.
Result<std::optional<KeptOperations>> parse_kept_operations(const Json& kept_rank);

// Where an adopted gang goes on: Trial::operations and each rank's Rank::operations_asked.
struct GangOperations {
  std::vector<Json> operations;  // {"length": L} or {"done": true}
  std::vector<size_t> asked;     // per rank, rank 0 first
};

// From each rank's account (rank 0 first): nullopt when there is nothing to rebuild (no rank
// had an answer, or a rank's agent said nothing: it predates this, and the gang is numbered
// from 0 as before); a failure (one line) when the accounts cannot be one sequence (two ranks
// told different n-th operations, or a rank's next one no agent still knows).
Result<std::optional<GangOperations>> rebuild_gang_operations(
    const std::vector<std::optional<KeptOperations>>& ranks);

}  // namespace cairn
