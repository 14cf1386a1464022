// Collective communication: Gloo over TCP between ranks run as threads of this process,
// meeting through a directory-backed key/value store; NCCL when a GPU is present.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <cairn/detail/gloo_ring.hpp>
#include "collective/collective.h"
#include "collective/file_kv_store.h"
#include "collective/gloo_collective.h"
#include "collective/nccl_collective.h"
#include "gpu/cuda_device_buffer.h"
#include "gpu/cuda_driver.h"
#include "test_dir.h"
#include "tests/unit/cairn_skip.h"

namespace cairn {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Runs body(rank, collective) on `size` threads, each with its own Gloo collective.
void run_ranks(int size, const std::function<void(int, Collective&)>& body,
               GlooOptions options = {}) {
  testing::TestDir dir;
  FileKeyValueStore kv(dir.path());
  options.timeout = std::chrono::seconds(30);
  std::vector<Status> created(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      auto c = make_gloo_collective(kv, r, size, options);
      if (!c.ok()) {
        created[r] = c.status();
        return;
      }
      body(r, **c);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) CHECK_MESSAGE(created[r].ok(), created[r].message());
}

// Integer-valued floats: every partial sum is exact, whatever the order.
float value(int rank, size_t i) {
  return static_cast<float>((i % 1000) * (rank + 1) + rank);
}

float expected_sum(int size, size_t i) {
  float s = 0;
  for (int r = 0; r < size; ++r) s += value(r, i);
  return s;
}

TEST_CASE("gloo all-reduce sums exactly on 2 and 3 ranks, with broadcast and barrier") {
  for (int size : {2, 3}) {
    CAPTURE(size);
    std::vector<std::vector<size_t>> wrong(size);  // first mismatching index per count
    std::vector<Status> failures(size);
    std::vector<std::vector<char>> received(size);
    run_ranks(size, [&](int rank, Collective& c) {
      CHECK(c.rank() == rank);
      CHECK(c.size() == size);
      for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = value(rank, i);
        if (Status st = c.allreduce_sum(data.data(), count); !st.ok()) {
          failures[rank] = st;
          return;
        }
        size_t bad = count;
        for (size_t i = 0; i < count && bad == count; ++i)
          if (data[i] != expected_sum(size, i)) bad = i;
        wrong[rank].push_back(bad == count ? 0 : bad + 1);
      }
      std::vector<char> message(100003, 0);
      if (rank == 1)
        for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<char>(i * 7 + 1);
      if (Status st = c.broadcast(message.data(), message.size(), 1); !st.ok()) {
        failures[rank] = st;
        return;
      }
      received[rank] = message;
      if (Status st = c.barrier(); !st.ok()) failures[rank] = st;
    });
    for (int r = 0; r < size; ++r) {
      CHECK_MESSAGE(failures[r].ok(), failures[r].message());
      CHECK(wrong[r] == std::vector<size_t>{0, 0, 0});
      REQUIRE(received[r].size() == 100003);
      CHECK(received[r][5] == static_cast<char>(36));
      CHECK(received[r] == received[1]);
    }
  }
}

TEST_CASE("gloo all-reduce of arbitrary floats is bit-identical on every rank") {
  const int size = 3;
  const size_t count = 300001;
  std::vector<std::vector<float>> results(size);
  run_ranks(size, [&](int rank, Collective& c) {
    std::vector<float> data(count);
    uint64_t x = 0x9E3779B97F4A7C15ull * (rank + 1);
    for (auto& v : data) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<float>(static_cast<int64_t>(x % 2000001) - 1000000) / 977.0f;
    }
    if (c.allreduce_sum(data.data(), count).ok()) results[rank] = data;
  });
  REQUIRE(results[0].size() == count);
  for (int r = 1; r < size; ++r)
    CHECK(std::memcmp(results[0].data(), results[r].data(), count * sizeof(float)) == 0);
}

TEST_CASE("gloo's own algorithms and busy polling give the same sums") {
  struct Variant {
    const char* name;
    GlooAlgorithm algorithm;
    bool busy_poll;
  };
  for (const Variant& v : {Variant{"ring, busy poll", GlooAlgorithm::kRing, true},
                           Variant{"gloo ring", GlooAlgorithm::kGlooRing, false},
                           Variant{"gloo bcube", GlooAlgorithm::kGlooBcube, false}}) {
    CAPTURE(v.name);
    GlooOptions options;
    options.algorithm = v.algorithm;
    options.busy_poll = v.busy_poll;
    std::vector<int> exact(2, 0);
    std::vector<Status> failures(2);
    run_ranks(
        2,
        [&](int rank, Collective& c) {
          const size_t count = 300000;
          std::vector<float> data(count);
          for (size_t i = 0; i < count; ++i) data[i] = value(rank, i);
          int64_t word = rank == 0 ? 42 : 0;
          Status st = c.allreduce_sum(data.data(), count);
          if (st.ok()) st = c.allreduce_sum_async(data.data(), 10)->wait();
          if (st.ok()) st = c.broadcast(&word, sizeof(word), 0);
          if (st.ok()) st = c.barrier();
          failures[rank] = st;
          bool ok = word == 42 && data[3] == 2 * expected_sum(2, 3);
          for (size_t i = 10; i < count; ++i) ok = ok && data[i] == expected_sum(2, i);
          exact[rank] = ok;
        },
        options);
    for (int r = 0; r < 2; ++r) {
      CHECK_MESSAGE(failures[r].ok(), failures[r].message());
      CHECK(exact[r] == 1);
    }
  }
}

TEST_CASE("gloo ring in many small pieces, and the piece size is safe for the socket buffers") {
  const size_t safe = gloo_ring::safe_piece_bytes(0);
  CHECK(safe >= gloo_ring::kMinPieceBytes);
  CHECK(safe <= gloo_ring::kDefaultPieceBytes);
  CHECK(safe % 4096 == 0);
  CHECK(gloo_ring::safe_piece_bytes(5000) == 4096);

  GlooOptions options;
  options.segment_bytes = 4096;  // 1024 floats per piece: dozens of pieces per chunk
  const size_t count = 100003;
  std::vector<int> exact(3, 0);
  run_ranks(
      3,
      [&](int rank, Collective& c) {
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = value(rank, i);
        std::vector<char> bytes(50000, static_cast<char>(rank));
        bool ok = c.allreduce_sum(data.data(), count).ok() &&
                  c.broadcast(bytes.data(), bytes.size(), 2).ok();
        for (size_t i = 0; i < count; ++i) ok = ok && data[i] == expected_sum(3, i);
        exact[rank] = ok && bytes.front() == 2 && bytes.back() == 2;
      },
      options);
  CHECK(exact == std::vector<int>{1, 1, 1});
}

TEST_CASE("gloo async buckets complete in issue order, before a later synchronous call") {
  const int size = 2;
  const std::vector<size_t> buckets = {7, 100000, 1, 65536, 3000, 250000};
  std::vector<std::vector<std::vector<float>>> results(size);
  std::vector<Status> failures(size);
  run_ranks(size, [&](int rank, Collective& c) {
    std::vector<std::vector<float>> data;
    for (size_t b = 0; b < buckets.size(); ++b) {
      data.emplace_back(buckets[b]);
      for (size_t i = 0; i < buckets[b]; ++i) data[b][i] = value(rank, i + b);
    }
    std::vector<std::unique_ptr<PendingReduce>> pending;
    for (auto& bucket : data)
      pending.push_back(c.allreduce_sum_async(bucket.data(), bucket.size()));
    // A synchronous call issued now runs after every bucket above.
    std::vector<float> last(10, static_cast<float>(rank + 1));
    if (Status st = c.allreduce_sum(last.data(), last.size()); !st.ok()) failures[rank] = st;
    CHECK(last[9] == 3.0f);
    // Waited in reverse order: completion does not depend on the order of waits.
    for (size_t b = pending.size(); b-- > 0;)
      if (Status st = pending[b]->wait(); !st.ok()) failures[rank] = st;
    results[rank] = std::move(data);
  });
  for (int r = 0; r < size; ++r) {
    CHECK_MESSAGE(failures[r].ok(), failures[r].message());
    REQUIRE(results[r].size() == buckets.size());
    for (size_t b = 0; b < buckets.size(); ++b) {
      bool exact = true;
      for (size_t i = 0; i < buckets[b]; ++i)
        exact = exact && results[r][b][i] == expected_sum(size, i + b);
      CHECK_MESSAGE(exact, "bucket " << b << " on rank " << r);
    }
  }
}

TEST_CASE("gloo rendezvous times out when a rank never comes") {
  testing::TestDir dir;
  FileKeyValueStore kv(dir.path());
  const auto start = Clock::now();
  auto c = make_gloo_collective(kv, 0, 2, "127.0.0.1", milliseconds(300));
  const auto took = Clock::now() - start;
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("gloo") != std::string::npos);
  CHECK(took >= milliseconds(300));
  CHECK(took < std::chrono::seconds(10));
}

TEST_CASE("gloo all-reduce times out when a peer never calls, and the peer then fails fast") {
  testing::TestDir dir;
  FileKeyValueStore kv(dir.path());
  std::mutex mu;
  std::condition_variable cv;
  bool rank0_done = false;
  Status rank0_first, rank0_second, rank1_status;
  Clock::duration rank0_took{}, rank1_took{};

  std::thread peer([&] {
    GlooOptions options;
    options.timeout = std::chrono::seconds(20);
    auto c = make_gloo_collective(kv, 1, 2, options);
    if (!c.ok()) {
      rank1_status = c.status();
      return;
    }
    // Joins the all-reduce only after rank 0 gave up on it.
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return rank0_done; });
    lock.unlock();
    std::vector<float> data(1000, 1.0f);
    const auto start = Clock::now();
    rank1_status = (*c)->allreduce_sum(data.data(), data.size());
    rank1_took = Clock::now() - start;
  });

  {
    GlooOptions options;
    options.timeout = milliseconds(500);
    auto c = make_gloo_collective(kv, 0, 2, options);
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    std::vector<float> data(1000, 1.0f);
    const auto start = Clock::now();
    rank0_first = (*c)->allreduce_sum(data.data(), data.size());
    rank0_took = Clock::now() - start;
    rank0_second = (*c)->barrier();
    {
      std::lock_guard<std::mutex> lock(mu);
      rank0_done = true;
    }
    cv.notify_all();
    peer.join();  // rank 0's collective (its sockets) lives until the peer is done
  }

  CHECK_FALSE(rank0_first.ok());
  MESSAGE("rank 0: " << rank0_first.message());
  CHECK(rank0_took >= milliseconds(500));
  CHECK(rank0_took < std::chrono::seconds(10));
  // A broken collective refuses further calls with the first error.
  CHECK(rank0_second.message() == rank0_first.message());
  // The peer finds the connection closed long before its own 20 s timeout.
  CHECK_FALSE(rank1_status.ok());
  MESSAGE("rank 1: " << rank1_status.message());
  CHECK(rank1_took < std::chrono::seconds(10));
}

TEST_CASE("gloo ranks whose calls differ get an error, not a wrong sum") {
  std::vector<Status> results(2);
  std::vector<Clock::duration> took(2);
  GlooOptions options;
  run_ranks(
      2,
      [&](int rank, Collective& c) {
        std::vector<float> data(1000, 1.0f);
        const auto start = Clock::now();
        results[rank] = c.allreduce_sum(data.data(), rank == 0 ? 1000 : 999);
        took[rank] = Clock::now() - start;
      },
      options);
  for (int r = 0; r < 2; ++r) {
    CHECK_FALSE(results[r].ok());
    MESSAGE("rank " << r << ": " << results[r].message());
    CHECK(took[r] < std::chrono::seconds(10));  // well before the 30 s timeout
  }
}

TEST_CASE("gloo with one rank needs no peers, and bad ranks are refused") {
  testing::TestDir dir;
  FileKeyValueStore kv(dir.path());
  auto solo = make_gloo_collective(kv, 0, 1);
  REQUIRE(solo.ok());
  float x[3] = {1, 2, 3};
  CHECK((*solo)->allreduce_sum(x, 3).ok());
  CHECK(x[2] == 3.0f);
  CHECK((*solo)->allreduce_sum_async(x, 3)->wait().ok());
  CHECK((*solo)->barrier().ok());
  CHECK(make_gloo_collective(kv, 2, 2).status().kind() == ErrorKind::kBadInput);
  CHECK(make_gloo_collective(kv, 0, 0).status().kind() == ErrorKind::kBadInput);
}

TEST_CASE("nccl all-reduce on the GPU [needs nccl]") {
  testing::TestDir dir;
  FileKeyValueStore kv(dir.path());
  if (!nccl_available()) {
    auto c = make_nccl_collective(kv, 0, 1);
    CHECK_FALSE(c.ok());
    CHECK(c.status().kind() == ErrorKind::kNotFound);
    CAIRN_SKIP("needs nccl: " << c.status().message());
  }
  if (auto gpu = cuda::Context::retain(0);
      gpu.ok() && gpu->name().find("host emulation") != std::string::npos) {
    CAIRN_SKIP("needs nccl: NCCL needs a real GPU, not tests/fake_cuda's host emulation");
  }
  // One GPU admits one NCCL rank, so the data path runs with one rank; the rendezvous
  // timeout runs with two (the second never comes).
  NcclOptions options;
  options.key_prefix = "nccl-1";
  options.timeout = std::chrono::seconds(60);
  auto c = make_nccl_collective(kv, 0, 1, options);
  REQUIRE_MESSAGE(c.ok(), c.status().message());
  const size_t count = 1 << 20;
  auto buf = CudaDeviceBuffer::allocate(0, count * sizeof(float));
  REQUIRE_MESSAGE(buf.ok(), buf.status().message());
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = value(0, i);
  REQUIRE((*buf)->upload(host.data(), count * sizeof(float)).ok());
  auto* device = static_cast<float*>((*buf)->data());
  CHECK((*c)->allreduce_sum(device, count).ok());
  auto p1 = (*c)->allreduce_sum_async(device, count / 2);
  auto p2 = (*c)->allreduce_sum_async(device + count / 2, count / 2);
  CHECK(p1->wait().ok());
  CHECK(p2->wait().ok());
  CHECK((*c)->broadcast(device, 16, 0).ok());
  CHECK((*c)->barrier().ok());
  std::vector<float> back(count);
  REQUIRE((*buf)->download(back.data(), count * sizeof(float)).ok());
  CHECK(back == host);  // one rank: the sum is the input

  options.key_prefix = "nccl-2";
  options.timeout = milliseconds(2000);
  const auto start = Clock::now();
  auto lonely = make_nccl_collective(kv, 0, 2, options);
  CHECK_FALSE(lonely.ok());
  MESSAGE("NCCL without its peer: " << lonely.status().message());
  CHECK(Clock::now() - start < std::chrono::seconds(30));
}

}  // namespace
}  // namespace cairn
