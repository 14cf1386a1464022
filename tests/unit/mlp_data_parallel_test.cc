// builtin:mlp data parallel: ranks as threads of this process (rank_threads.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "collective/file_kv_store.h"
#include "collective/gloo_collective.h"
#include "rank_threads.h"
#include "trainer/gradient_buckets.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_trainer.h"

namespace cairn {
namespace {

using testing::bit_equal;
using testing::RankRun;

// Trains `epochs` epochs of builtin:mlp with `json` on `world` ranks (threads).
std::vector<RankRun> train_ranks(int world, const Json& json, int epochs) {
  auto hparams = MlpHparams::from_json(json);
  REQUIRE_MESSAGE(hparams.ok(), hparams.status().message());
  return testing::train_ranks(world, *hparams, MlpDeviceChoice{.cuda = false, .note = "cpu"},
                              epochs);
}

// batch_size 100 over 2400 training rows: every batch splits 50/50; 37 does not divide
// evenly, and its last batch (2400 = 64·37 + 32) leaves uneven shards.
const Json kHparams = {{"hidden", 32}, {"layers", 2}, {"batch_size", 100}, {"bucket_kb", 1}};

TEST_CASE("2 ranks with the same global batch follow the single-rank loss curve") {
  // batch_size 1: one rank's shard of every batch is empty; it still takes part.
  for (int batch : {100, 37, 1}) {
    CAPTURE(batch);
    Json json = kHparams;
    json["batch_size"] = batch;
    const int epochs = batch == 1 ? 1 : 4;
    const auto single = train_ranks(1, json, epochs);
    const auto pair = train_ranks(2, json, epochs);
    // Every rank ends with the same weights and reports the same loss.
    CHECK(bit_equal(pair[0].weights, pair[1].weights));
    CHECK(pair[0].losses == pair[1].losses);
    // The same curve as one rank, up to float rounding (the gradient sum is split).
    for (size_t e = 0; e < single[0].losses.size(); ++e) {
      CAPTURE(e);
      CHECK(pair[0].losses[e] == doctest::Approx(single[0].losses[e]).epsilon(1e-3));
    }
    double max_diff = 0;
    for (size_t i = 0; i < single[0].weights.size(); ++i)
      max_diff = std::max<double>(max_diff, std::fabs(single[0].weights[i] - pair[0].weights[i]));
    CHECK(max_diff < 1e-3);
  }
}

TEST_CASE("2-rank training is bit-exact from run to run, overlapped or not") {
  const auto first = train_ranks(2, kHparams, 3);
  const auto again = train_ranks(2, kHparams, 3);
  CHECK(bit_equal(first[0].weights, again[0].weights));
  CHECK(first[0].losses == again[0].losses);
  Json after = kHparams;
  after["allreduce"] = "after_backward";
  const auto sequential = train_ranks(2, after, 3);
  CHECK(bit_equal(first[0].weights, sequential[0].weights));
  Json one_bucket = kHparams;
  one_bucket["bucket_kb"] = 1 << 20;
  const auto whole = train_ranks(2, one_bucket, 3);
  CHECK(bit_equal(whole[0].weights, whole[1].weights));
}

// A collective that records the calls instead of reducing (one rank: sums are identities).
class RecordingCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const char* backend() const override { return "recording"; }
  Status allreduce_sum(float* data, size_t count) override {
    calls.push_back({data, count, false});
    return Status::Ok();
  }
  std::unique_ptr<PendingReduce> allreduce_sum_async(float* data, size_t count) override {
    calls.push_back({data, count, true});
    return std::make_unique<CompletedReduce>(Status::Ok());
  }
  Status broadcast(void*, size_t, int) override { return Status::Ok(); }
  Status barrier() override { return Status::Ok(); }
  struct Call {
    float* data;
    size_t count;
    bool async;
  };
  std::vector<Call> calls;
};

TEST_CASE("gradient buckets group layers from the output back and overlap when asked") {
  // Layers of 100, 300, 50 and 10 floats; buckets of at least 1 KiB (256 floats).
  std::vector<float> grads(460);
  const std::vector<size_t> sizes = {100, 300, 50, 10};
  std::vector<size_t> offsets = {0, 100, 400, 450};
  for (bool overlap : {true, false}) {
    CAPTURE(overlap);
    RecordingCollective rec;
    GradientBuckets buckets(rec, sizes, 1024, overlap);
    CHECK(buckets.bucket_count() == 2);  // {3, 2, 1} = 360 floats, then {0} = 100
    for (int l = 3; l >= 0; --l) {
      buckets.layer_ready(l, std::span<float>(grads).subspan(offsets[l], sizes[l]));
      if (overlap && l == 1) {
        REQUIRE(rec.calls.size() == 1);  // issued before layer 0 is even ready
        CHECK(rec.calls[0].data == grads.data() + 100);
        CHECK(rec.calls[0].count == 360);
      }
    }
    if (!overlap) CHECK(rec.calls.empty());
    REQUIRE(buckets.finish().ok());
    REQUIRE(rec.calls.size() == 2);
    CHECK(rec.calls[1].data == grads.data());
    CHECK(rec.calls[1].count == 100);
    for (const auto& call : rec.calls) CHECK(call.async == overlap);
  }
}

}  // namespace
}  // namespace cairn
