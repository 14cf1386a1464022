#include "collective/nccl_collective.h"

#include "gpu/cuda_driver.h"
#include "gpu/nccl_library.h"

#include <cairn/detail/hex.hpp>

#include <climits>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

using nccl::api;
using nccl::Api;
using nccl::kNcclFloat32;
using nccl::kNcclInProgress;
using nccl::kNcclSuccess;
using nccl::kNcclSum;
using nccl::kNcclUint8;
using nccl::ncclComm_t;
using nccl::NcclConfig214;
using nccl::ncclResult_t;
using nccl::ncclUniqueId;

// The CUDA driver comes from gpu/cuda_driver.h, loaded once for the whole process.
using cuda::CUcontext;
using cuda::CUdevice;
using cuda::CUdeviceptr;
using cuda::CUevent;
using cuda::CUresult;
using cuda::CUstream;
constexpr CUresult kCudaSuccess = cuda::kSuccess;
constexpr CUresult kCudaErrorNotReady = cuda::kErrorNotReady;
constexpr unsigned kStreamNonBlocking = cuda::kStreamNonBlocking;
constexpr unsigned kEventDisableTiming = cuda::kEventDisableTiming;

const cuda::Driver& drv() {
  return cuda::driver();
}

Status cuda_error(const char* what, CUresult r) {
  return cuda::error(what, r);
}

// Polls until `done` says yes (returning its Status) or the deadline passes. Spins
// briefly, then sleeps in short steps: GPU collectives finish in microseconds to
// milliseconds, and a blocking wait would have no timeout.
Status poll_until(Clock::time_point deadline, const std::function<std::optional<Status>()>& done,
                  const std::string& on_timeout) {
  for (int spins = 0;; ++spins) {
    if (auto st = done()) return *st;
    if (Clock::now() >= deadline) return Status::Failed(on_timeout);
    if (spins < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(int rank, int size, const NcclOptions& options)
      : rank_(rank), size_(size), options_(options) {}

  ~NcclCollective() override {
    const Api& a = api();
    if (context_) drv().cuCtxSetCurrent(context_);
    if (comm_) {
      // Let queued work finish, then tear down; abort when that does not come in time.
      Status st = sync_stream(Clock::now() + options_.timeout);
      if (st.ok() && a.ncclCommFinalize) {
        ncclResult_t r = a.ncclCommFinalize(comm_);
        st = r == kNcclSuccess || r == kNcclInProgress
                 ? wait_comm_ready(Clock::now() + options_.timeout, "finalize")
                 : nccl_error("ncclCommFinalize", r);
      }
      if (st.ok())
        a.ncclCommDestroy(comm_);
      else
        a.ncclCommAbort(comm_);
    }
    if (scratch_) drv().cuMemFree(scratch_);
    if (done_event_) drv().cuEventDestroy(done_event_);
    if (stream_) drv().cuStreamDestroy(stream_);
    if (context_) drv().cuDevicePrimaryCtxRelease(device_);
  }

  Status init(KeyValueStore& kv) {
    const Api& a = api();
    const auto deadline = Clock::now() + options_.timeout;
    CUresult r = drv().cuDeviceGet(&device_, options_.device);
    if (r != kCudaSuccess) return cuda_error("cuDeviceGet", r);
    if ((r = drv().cuDevicePrimaryCtxRetain(&context_, device_)) != kCudaSuccess) {
      context_ = nullptr;
      return cuda_error("cuDevicePrimaryCtxRetain", r);
    }
    if ((r = drv().cuCtxSetCurrent(context_)) != kCudaSuccess)
      return cuda_error("cuCtxSetCurrent", r);
    if ((r = drv().cuStreamCreate(&stream_, kStreamNonBlocking)) != kCudaSuccess)
      return cuda_error("cuStreamCreate", r);
    if ((r = drv().cuEventCreate(&done_event_, kEventDisableTiming)) != kCudaSuccess)
      return cuda_error("cuEventCreate", r);

    ncclUniqueId id;
    const std::string key = options_.key_prefix + "/unique_id";
    if (rank_ == 0) {
      ncclResult_t nr = a.ncclGetUniqueId(&id);
      if (nr != kNcclSuccess) return nccl_error("ncclGetUniqueId", nr);
      if (Status st = kv.set(key, sdk_detail::to_hex(&id, sizeof(id))); !st.ok())
        return Status::Failed("NCCL rendezvous: " + st.message());
    } else {
      Result<std::string> text = kv.wait_get(key, options_.timeout);
      if (!text.ok()) return Status::Failed("NCCL rendezvous: " + text.status().message());
      if (!sdk_detail::from_hex(*text, &id, sizeof(id)))
        return Status::Failed("NCCL rendezvous: malformed unique id under '" + key + "'");
    }

    // Non-blocking, so that waiting for the other ranks has a deadline.
    NcclConfig214 config;
    config.blocking = 0;
    ncclResult_t nr = a.ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
    if (nr != kNcclSuccess && nr != kNcclInProgress) {
      Status st = nccl_error("ncclCommInitRank", nr);
      if (comm_) a.ncclCommAbort(comm_);
      comm_ = nullptr;
      return st;
    }
    Status st =
        wait_comm_ready(deadline, "waiting for " + std::to_string(size_) + " ranks to join");
    if (!st.ok()) {
      a.ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return st;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }

  Status allreduce_sum(float* data, size_t count) override {
    return allreduce_sum_async(data, count)->wait();
  }

  std::unique_ptr<PendingReduce> allreduce_sum_async(float* data, size_t count) override {
    if (count == 0) return std::make_unique<CompletedReduce>(Status::Ok());
    Status st = enqueue("ncclAllReduce", [&] {
      return api().ncclAllReduce(data, data, count, kNcclFloat32, kNcclSum, comm_, stream_);
    });
    if (!st.ok()) return std::make_unique<CompletedReduce>(st);
    CUevent event = nullptr;
    CUresult r = drv().cuEventCreate(&event, kEventDisableTiming);
    if (r == kCudaSuccess) r = drv().cuEventRecord(event, stream_);
    if (r != kCudaSuccess) {
      if (event) drv().cuEventDestroy(event);
      return std::make_unique<CompletedReduce>(fail(cuda_error("cuEventRecord", r)));
    }
    return std::make_unique<Pending>(this, event);
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_) return Status::BadInput("broadcast root out of range");
    if (bytes == 0) return Status::Ok();
    Status st = enqueue("ncclBroadcast", [&] {
      return api().ncclBroadcast(data, data, bytes, kNcclUint8, root, comm_, stream_);
    });
    return st.ok() ? sync_stream(Clock::now() + options_.timeout) : st;
  }

  Status barrier() override {
    // An all-reduce of one float: NCCL has no barrier.
    if (!scratch_) {
      drv().cuCtxSetCurrent(context_);
      CUresult r = drv().cuMemAlloc(&scratch_, sizeof(float));
      if (r != kCudaSuccess) {
        scratch_ = 0;
        return cuda_error("cuMemAlloc", r);
      }
    }
    return allreduce_sum(reinterpret_cast<float*>(scratch_), 1);
  }

 private:
  class Pending final : public PendingReduce {
   public:
    Pending(NcclCollective* owner, CUevent event) : owner_(owner), event_(event) {}
    ~Pending() override {
      wait();
      drv().cuEventDestroy(event_);
    }
    Status wait() override {
      if (!waited_) {
        result_ = owner_->wait_event(event_, Clock::now() + owner_->options_.timeout);
        waited_ = true;
      }
      return result_;
    }

   private:
    NcclCollective* owner_;
    CUevent event_;
    bool waited_ = false;
    Status result_;
  };

  Status nccl_error(const char* what, ncclResult_t r) const {
    std::string msg = std::string("NCCL ") + what + ": " + api().ncclGetErrorString(r);
    if (comm_ && api().ncclGetLastError) {
      const char* last = api().ncclGetLastError(comm_);
      if (last && *last) msg += std::string(" (") + last + ")";
    }
    return Status::Failed(msg);
  }

  // Marks the collective broken and aborts the communicator (which also unblocks work of
  // ours still queued on the stream).
  Status fail(Status st) {
    if (failed_.ok()) failed_ = st;
    if (comm_) {
      api().ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return failed_;
  }

  Status enqueue(const char* what, const std::function<ncclResult_t()>& call) {
    if (!failed_.ok()) return failed_;
    drv().cuCtxSetCurrent(context_);
    ncclResult_t r = call();
    if (r == kNcclInProgress) {
      Status st = wait_comm_ready(Clock::now() + options_.timeout, what);
      return st.ok() ? st : fail(st);
    }
    return r == kNcclSuccess ? Status::Ok() : fail(nccl_error(what, r));
  }

  Status wait_comm_ready(Clock::time_point deadline, const std::string& what) {
    return poll_until(
        deadline,
        [&]() -> std::optional<Status> {
          ncclResult_t state = kNcclInProgress;
          ncclResult_t r = api().ncclCommGetAsyncError(comm_, &state);
          if (r != kNcclSuccess) return nccl_error("ncclCommGetAsyncError", r);
          if (state == kNcclInProgress) return std::nullopt;
          if (state != kNcclSuccess) return nccl_error(what.c_str(), state);
          return Status::Ok();
        },
        "NCCL: timed out after " + std::to_string(options_.timeout.count()) + " ms " + what);
  }

  Status wait_event(CUevent event, Clock::time_point deadline) {
    if (!failed_.ok()) return failed_;
    drv().cuCtxSetCurrent(context_);
    Status st = poll_until(
        deadline,
        [&]() -> std::optional<Status> {
          CUresult r = drv().cuEventQuery(event);
          if (r == kCudaSuccess) return Status::Ok();
          if (r != kCudaErrorNotReady) return cuda_error("cuEventQuery", r);
          ncclResult_t state = kNcclSuccess;
          api().ncclCommGetAsyncError(comm_, &state);
          if (state != kNcclSuccess && state != kNcclInProgress)
            return nccl_error("collective", state);
          return std::nullopt;
        },
        "NCCL: collective timed out after " + std::to_string(options_.timeout.count()) + " ms");
    return st.ok() ? st : fail(st);
  }

  Status sync_stream(Clock::time_point deadline) {
    if (!failed_.ok()) return failed_;
    CUresult r = drv().cuEventRecord(done_event_, stream_);
    if (r != kCudaSuccess) return fail(cuda_error("cuEventRecord", r));
    return wait_event(done_event_, deadline);
  }

  const int rank_;
  const int size_;
  const NcclOptions options_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent done_event_ = nullptr;
  CUdeviceptr scratch_ = 0;
  ncclComm_t comm_ = nullptr;
  Status failed_;
};

}  // namespace

Result<std::unique_ptr<Collective>> make_nccl_collective(KeyValueStore& kv, int rank, int size,
                                                         const NcclOptions& options) {
  const Api& a = api();
  if (!a.nccl_status.ok()) return a.nccl_status;
  if (!drv().status.ok()) return drv().status;
  if (size < 1 || rank < 0 || rank >= size)
    return Status::BadInput("NCCL: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                            " is out of range");
  if (options.device < 0 || options.device >= drv().device_count)
    return Status::BadInput("NCCL: no CUDA device " + std::to_string(options.device));
  auto collective = std::make_unique<NcclCollective>(rank, size, options);
  if (Status st = collective->init(kv); !st.ok()) return st;
  return std::unique_ptr<Collective>(std::move(collective));
}

}  // namespace cairn
