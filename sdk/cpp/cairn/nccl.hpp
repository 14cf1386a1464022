// The NCCL communicator of a data-parallel C++ trial on GPUs. Header-only like the rest of
// the SDK; the program includes NCCL's and CUDA's headers and links `-lnccl -lcudart`.
//
//   cudaSetDevice(0);                     // cairn gives each rank one GPU (CUDA_VISIBLE_DEVICES)
//   ncclComm_t comm = cairn::connect_nccl(*ctx, &error);          // every rank
//   ncclAllReduce(grad, grad, n, ncclFloat, ncclSum, comm, stream);
//
// Rank 0 makes NCCL's unique id and publishes it in the trial's rendezvous table in cairn
// (kv_set); the other ranks read it there (kv_get). No shared file system, no fixed port,
// and the table belongs to one attempt of the trial, so a restarted trial cannot pick up a
// dead attempt's id.
//
// The communicator is created non-blocking and waited for with a deadline: a rank that
// never arrives makes the others fail within `timeout` instead of hanging in NCCL. A rank
// stuck later inside a collective is cairn's to handle (`liveness_timeout`).
#pragma once

#include <nccl.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "cairn/detail/hex.hpp"
#include "cairn/trial.hpp"

namespace cairn {

// Rank 0: creates the id and publishes it under `key`. Other ranks: wait up to `timeout`
// for it. False with *error on failure.
inline bool nccl_unique_id(Context& ctx, ncclUniqueId* id, std::chrono::milliseconds timeout,
                           std::string* error, const std::string& key = "nccl/unique_id") {
  if (ctx.rank() == 0) {
    if (ncclResult_t r = ncclGetUniqueId(id); r != ncclSuccess) {
      if (error) *error = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
      return false;
    }
    return ctx.kv_set(key, sdk_detail::to_hex(id, sizeof(*id)), error);
  }
  std::optional<std::string> text = ctx.kv_get(key, timeout, error);
  if (!text) return false;
  if (!sdk_detail::from_hex(*text, id, sizeof(*id))) {
    if (error) *error = "NCCL rendezvous: malformed unique id under '" + key + "'";
    return false;
  }
  return true;
}

// The communicator of all the trial's ranks, on the current CUDA device; nullptr with
// *error when the ranks did not all join within `timeout`.
inline ncclComm_t connect_nccl(Context& ctx, std::string* error = nullptr,
                               std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ncclUniqueId id;
  if (!nccl_unique_id(ctx, &id, timeout, error)) return nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, ctx.world_size(), id, ctx.rank(), &config);
  while (r == ncclInProgress || (r == ncclSuccess && comm != nullptr)) {
    ncclResult_t state = ncclSuccess;
    r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) break;
    if (state == ncclSuccess) return comm;
    if (state != ncclInProgress) {
      r = state;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ncclCommAbort(comm);
      if (error)
        *error = "NCCL: " + std::to_string(ctx.world_size()) + " ranks did not join within " +
                 std::to_string(timeout.count()) + " ms";
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (comm) ncclCommAbort(comm);
  if (error) *error = std::string("ncclCommInitRankConfig: ") + ncclGetErrorString(r);
  return nullptr;
}

}  // namespace cairn
