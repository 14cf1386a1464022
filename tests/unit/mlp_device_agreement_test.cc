// trainer/mlp_device_agreement.h: with `device: auto` every rank of a trial trains where rank 0
// decided, whatever its own machine has; ranks stand in for machines through a chooser.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>

#include "collective/memory_kv_store.h"
#include "trainer/mlp_device_agreement.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;

// A machine with a usable GPU, or one without ("no CUDA device"): mlp_gpu_usable's answer.
MlpGpuCheck machine(bool gpu) {
  return [gpu](int) { return gpu ? Status::Ok() : Status::NotFound("no CUDA device"); };
}

// A table whose writes fail, as the control channel's do when the coordinator is gone.
class FailingKeyValueStore final : public KeyValueStore {
 public:
  Status set(const std::string&, const std::string&) override {
    return Status::Io("the control channel is closed");
  }
  Result<std::string> wait_get(const std::string&, milliseconds) override {
    return Status::Io("the control channel is closed");
  }
};

TEST_CASE("device auto: rank 0 without a GPU makes every rank train on the CPU") {
  MemoryKeyValueStore kv;
  auto chief = agree_mlp_device(MlpDevice::kAuto, 0, 2, kv, milliseconds(1000), machine(false));
  REQUIRE(chief.ok());
  CHECK_FALSE(chief->cuda);
  auto follower = agree_mlp_device(MlpDevice::kAuto, 1, 2, kv, milliseconds(1000), machine(true));
  REQUIRE(follower.ok());
  CHECK_FALSE(follower->cuda);  // alone it would take its GPU
  CHECK(follower->note == "cpu (auto, as rank 0)");
  CHECK(chief->note == "cpu (auto: no CUDA device)");
}

TEST_CASE("device auto: rank 0 with a GPU makes the ranks that have one follow it") {
  MemoryKeyValueStore kv;
  // The chief that chose the GPU returns only once the follower confirmed it.
  auto chief = std::async(std::launch::async, [&] {
    return agree_mlp_device(MlpDevice::kAuto, 0, 2, kv, milliseconds(5000), machine(true));
  });
  auto follower = agree_mlp_device(MlpDevice::kAuto, 1, 2, kv, milliseconds(5000), machine(true));
  REQUIRE(follower.ok());
  CHECK(follower->cuda);
  CHECK(follower->note == "cuda (auto, as rank 0)");
  auto chosen = chief.get();
  REQUIRE(chosen.ok());
  CHECK(chosen->cuda);
  CHECK(chosen->note == "cuda (auto)");
}

TEST_CASE("device auto: a value rank 0 cannot have published fails the rank, retryably") {
  MemoryKeyValueStore kv;
  REQUIRE(kv.set(kMlpDeviceKey, "tpu").ok());
  auto follower = agree_mlp_device(MlpDevice::kAuto, 1, 2, kv, milliseconds(1000), machine(true));
  REQUIRE_FALSE(follower.ok());
  CHECK(follower.status().exit_code() == 1);
  CHECK(follower.status().message() == "rank 0 published an unknown device \"tpu\"");
}

TEST_CASE("device auto: rank 0 that cannot publish its choice fails, retryably") {
  FailingKeyValueStore kv;
  auto chief = agree_mlp_device(MlpDevice::kAuto, 0, 2, kv, milliseconds(1000), machine(true));
  REQUIRE_FALSE(chief.ok());
  CHECK(chief.status().exit_code() == 1);
  CHECK(chief.status().message() ==
        "cannot publish the device to the other ranks: the control channel is closed");
}

TEST_CASE("device auto: a rank that cannot use rank 0's GPU fails at once as bad input") {
  MemoryKeyValueStore kv;
  // The chief must not enter NCCL's rendezvous, nor race the rank that cannot follow to an
  // exit of its own: it waits to be stopped, then fails retryably.
  std::atomic<int> waits_to_be_stopped{0};
  const MlpStopWait wait = [&](milliseconds) { ++waits_to_be_stopped; };
  auto chief = std::async(std::launch::async, [&] {
    return agree_mlp_device(MlpDevice::kAuto, 0, 3, kv, milliseconds(5000), machine(true), wait);
  });
  auto with_gpu = agree_mlp_device(MlpDevice::kAuto, 1, 3, kv, milliseconds(5000), machine(true));
  REQUIRE(with_gpu.ok());
  CHECK(with_gpu->cuda);
  auto without = agree_mlp_device(MlpDevice::kAuto, 2, 3, kv, milliseconds(5000), machine(false));
  REQUIRE_FALSE(without.ok());
  CHECK(without.status().exit_code() == 2);
  CHECK(without.status().message() ==
        "device: auto: rank 0 trains on the GPU but rank 2 cannot: no CUDA device (every rank "
        "of a trial needs a GPU, or set device: cpu)");
  auto chosen = chief.get();
  REQUIRE_FALSE(chosen.ok());
  CHECK(waits_to_be_stopped == 1);
  CHECK(chosen.status().exit_code() == 1);
  CHECK(chosen.status().message() ==
        "rank 2 cannot train on the GPU rank 0 chose (device: auto); its log says why");
}

TEST_CASE("device auto: a rank whose driver failed for now fails retryably, not as bad input") {
  MemoryKeyValueStore kv;
  const MlpStopWait no_wait = [](milliseconds) {};
  auto chief = std::async(std::launch::async, [&] {
    return agree_mlp_device(MlpDevice::kAuto, 0, 2, kv, milliseconds(5000), machine(true), no_wait);
  });
  const MlpGpuCheck not_ready = [](int) {
    return Status::Failed("CUDA driver 13.0 found but cuInit failed: system not yet initialized");
  };
  auto follower = agree_mlp_device(MlpDevice::kAuto, 1, 2, kv, milliseconds(5000), not_ready);
  REQUIRE_FALSE(follower.ok());
  CHECK(follower.status().exit_code() == 1);
  CHECK_FALSE(chief.get().ok());
}

TEST_CASE("device auto: rank 0 on the GPU fails, retryably, when a rank never confirms") {
  MemoryKeyValueStore kv;
  auto chief = agree_mlp_device(MlpDevice::kAuto, 0, 2, kv, milliseconds(50), machine(true));
  REQUIRE_FALSE(chief.ok());
  CHECK(chief.status().exit_code() == 1);
  CHECK(chief.status().message().find("rank 1 did not confirm the GPU rank 0 chose") == 0);
}

TEST_CASE("device auto: a rank whose chief never decides fails, retryably, after the timeout") {
  MemoryKeyValueStore kv;
  auto follower = agree_mlp_device(MlpDevice::kAuto, 1, 2, kv, milliseconds(50), machine(true));
  REQUIRE_FALSE(follower.ok());
  CHECK(follower.status().exit_code() == 1);
  CHECK(follower.status().message().find("rank 0 did not say which device") == 0);
}

TEST_CASE("device cpu, cuda, or one rank: no agreement, each rank applies the rule") {
  MemoryKeyValueStore kv;  // nothing is published, so a follower waiting would time out
  auto cpu = agree_mlp_device(MlpDevice::kCpu, 1, 2, kv, milliseconds(10), machine(true));
  REQUIRE(cpu.ok());
  CHECK_FALSE(cpu->cuda);
  auto cuda = agree_mlp_device(MlpDevice::kCuda, 1, 2, kv, milliseconds(10), machine(false));
  REQUIRE_FALSE(cuda.ok());
  CHECK(cuda.status().exit_code() == 2);
  auto alone = agree_mlp_device(MlpDevice::kAuto, 0, 1, kv, milliseconds(10), machine(true));
  REQUIRE(alone.ok());
  CHECK(alone->cuda);
  CHECK_FALSE(kv.wait_get(kMlpDeviceKey, milliseconds(0)).ok());  // one rank publishes nothing
}

}  // namespace
}  // namespace cairn
