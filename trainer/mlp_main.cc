#include "trainer/mlp_main.h"

#include <cairn/trial.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "collective/gloo_collective.h"
#include "collective/nccl_collective.h"
#include "collective/sdk_kv_store.h"
#include "common/exit_status.h"
#include "common/json.h"
#include "trainer/blas_core_type.h"
#include "trainer/mlp_device_agreement.h"
#include "trainer/mlp_hparams.h"
#include "trainer/mlp_trainer.h"

namespace cairn {
namespace {

int fail(int exit_code, const std::string& message) {
  std::fprintf(stderr, "cairn: error: builtin:mlp: %s\n", message.c_str());
  return exit_code;
}

// The loop of SPEC §4 with one change: validation runs after every epoch, not only at the
// end of an operation, so the metric curves have a point per epoch.
class BuiltinMlpTrial {
 public:
  BuiltinMlpTrial(Context& ctx, MlpTrainer& trainer) : ctx_(ctx), trainer_(trainer) {}

  int run() {
    while (const auto op = ctx_.next_operation()) {
      while (trainer_.epochs_completed() < op->length) {
        if (std::optional<int> exit_code = train_one_epoch()) return *exit_code;
      }
      if (validated_step_ != trainer_.epochs_completed())
        if (std::optional<int> exit_code = validate()) return *exit_code;
    }
    return 0;
  }

 private:
  // Returns an exit status when the trial must end now.
  std::optional<int> train_one_epoch() {
    const Result<double> epoch_loss = trainer_.train_epoch();
    if (!epoch_loss.ok()) {  // cairn restarts every rank from the latest checkpoint
      // On the CPU only the collective can fail; on a GPU, a CUDA call too. Both stay
      // retryable (exit 1): a rank lost or a CUDA error once training runs (a launch
      // failure, an ECC or Xid error that poisons the context) may not recur in a fresh
      // process with a fresh context; what repeats for sure (a missing library, a refused
      // module, a model larger than the GPU) ended the trial with kPermanentFailureExit (2) before
      // training.
      const std::string what = trainer_.on_gpu() ? "" : "the ranks lost each other: ";
      return fail(1, "epoch " + std::to_string(trainer_.epochs_completed() + 1) + ": " + what +
                         epoch_loss.status().message());
    }
    const double loss = *epoch_loss;
    const int64_t step = trainer_.epochs_completed();
    ctx_.report_training(step, {{"loss", loss}});
    if (std::optional<int> exit_code = validate()) return exit_code;
    // A diverged model stays diverged; restarting would repeat it, so it is reported (the
    // SDK sends NaN as null) and ends as bad hyperparameters, without a checkpoint.
    if (!std::isfinite(loss)) {
      return fail(kPermanentFailureExit, "training diverged at epoch " + std::to_string(step) +
                                             " (the loss is not finite); try a smaller lr");
    }
    if (!ctx_.checkpoint_due(step)) return std::nullopt;
    if (std::optional<int> exit_code = checkpoint(step)) return exit_code;
    if (ctx_.should_preempt()) return 0;
    return std::nullopt;
  }

  // Returns an exit status when the trial must end now (a GPU error).
  std::optional<int> validate() {
    // Every rank holds the same weights and cairn records only the chief's metrics: the
    // other ranks skip the work.
    if (ctx_.rank() != 0) {
      validated_step_ = trainer_.epochs_completed();
      return std::nullopt;
    }
    const Result<MlpTrainer::Eval> eval = trainer_.evaluate();
    validated_step_ = trainer_.epochs_completed();
    if (!eval.ok()) {  // cairn restarts the trial from its latest checkpoint
      return fail(1, "validation at epoch " + std::to_string(validated_step_) + ": " +
                         eval.status().message());
    }
    ctx_.report_validation(validated_step_,
                           {{"val_loss", eval->loss}, {"val_accuracy", eval->accuracy}});
    return std::nullopt;
  }

  std::optional<int> checkpoint(int64_t step) {
    // Every rank takes part (cairn registers the checkpoint once all have ended it); the
    // model is the same on every rank, so only the chief writes it.
    auto writer = ctx_.checkpoint(step);
    if (Status s = ctx_.rank() == 0 ? trainer_.save(writer.path()) : Status::Ok(); !s.ok()) {
      return fail(
          1, "cannot write the checkpoint at epoch " + std::to_string(step) + ": " + s.message());
    }
    if (!writer.commit()) {
      return fail(1, "the checkpoint at epoch " + std::to_string(step) +
                         " was not registered: " + writer.error());
    }
    return std::nullopt;
  }

  Context& ctx_;
  MlpTrainer& trainer_;
  int64_t validated_step_ = -1;
};

}  // namespace

int run_builtin_mlp() {
  std::string error;
  auto ctx = Context::init(&error);
  if (!ctx) return fail(1, "cannot start the trial: " + error);

  // The SDK speaks nlohmann::json; the rest of cairn uses the ordered flavour.
  auto hparams = MlpHparams::from_json(Json::parse(ctx->hparams().dump()));
  if (!hparams.ok()) return fail(kPermanentFailureExit, hparams.status().message());
  // Decided once, before the ranks connect: CPU ranks talk over Gloo, GPU ranks over NCCL.
  // With several ranks and `auto`, rank 0 decides for all (trainer/mlp_device_agreement.h), so
  // that ranks on machines that differ do not wait for each other in two rendezvous. The
  // trainer takes the decision as it is, note included.
  SdkKeyValueStore kv(*ctx);
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(hparams->collective_timeout * 1000.0));
  auto device = agree_mlp_device(hparams->device, ctx->rank(), ctx->world_size(), kv, timeout);
  if (!device.ok()) return fail(trial_exit_status(device.status()), device.status().message());
  std::unique_ptr<Collective> collective;
  if (ctx->world_size() > 1) {
    Result<std::unique_ptr<Collective>> made = Status::Ok();
    if (device->cuda) {
      // One GPU per rank: cairn gives each rank its own CUDA_VISIBLE_DEVICES, device 0.
      made =
          make_nccl_collective(kv, ctx->rank(), ctx->world_size(),
                               NcclOptions{.device = 0, .key_prefix = "nccl", .timeout = timeout});
    } else {
      GlooOptions options;
      // The interface cairn chose towards rank 0 (a gang over machines), else rank 0's
      // address, which is this machine's own when every rank runs here.
      if (const char* host = std::getenv("MASTER_ADDR"); host && *host) options.host = host;
      if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
        options.host = iface;
      options.timeout = timeout;
      made = make_gloo_collective(kv, ctx->rank(), ctx->world_size(), options);
    }
    if (!made.ok()) return fail(1, "cannot connect the ranks: " + made.status().message());
    collective = std::move(made).value();
  }
  auto trainer =
      MlpTrainer::create(*hparams, static_cast<uint64_t>(ctx->seed()), ctx->deterministic(),
                         std::filesystem::current_path(), *device, collective.get());
  if (!trainer.ok()) return fail(trial_exit_status(trainer.status()), trainer.status().message());

  if (const auto checkpoint = ctx->latest_checkpoint()) {
    if (Status s = (*trainer)->load(*checkpoint); !s.ok()) {
      return fail(trial_exit_status(s), "cannot resume: " + s.message());
    }
  }
  const std::string ranks = collective ? "; rank " + std::to_string(ctx->rank()) + " of " +
                                             std::to_string(ctx->world_size()) + " (" +
                                             collective->backend() + ")"
                                       : "";
  if (const std::string mismatch = blas::coretype_mismatch(); !mismatch.empty() && !device->cuda)
    std::fprintf(stderr, "builtin:mlp: warning: %s\n", mismatch.c_str());
  std::fprintf(stderr, "builtin:mlp: %s; epochs completed: %lld%s\n",
               (*trainer)->describe().c_str(),
               static_cast<long long>((*trainer)->epochs_completed()), ranks.c_str());
  return BuiltinMlpTrial(*ctx, **trainer).run();
}

}  // namespace cairn
