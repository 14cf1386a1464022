// A multilayer perceptron for classification: `layers` hidden ReLU layers of `hidden`
// units, then a linear layer into softmax cross-entropy. Matrix products go to BLAS
// (trainer/blas.h); bias adds, ReLU and softmax are plain loops the compiler vectorises.
//
// Memory layout, chosen for data parallelism: all parameters live in one flat buffer and
// all gradients in another, laid out layer by layer as [W (in×out, row-major), b (out)].
// A layer's gradients are therefore one contiguous span — a ready-made all-reduce bucket —
// and backward() hands each over the moment it is final (last layer first), so a
// collective can overlap the rest of the backward pass.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace cairn {

struct MlpShape {
  int inputs = 0;
  int hidden = 0;
  int layers = 0;  // hidden layers
  int classes = 0;

  int linear_layers() const { return layers + 1; }
  int width_in(int layer) const { return layer == 0 ? inputs : hidden; }
  int width_out(int layer) const { return layer == layers ? classes : hidden; }
  size_t layer_parameters(int layer) const;
  size_t parameters() const;
  std::string describe() const;  // "2→64→64→3"
  bool operator==(const MlpShape&) const = default;
};

// Scratch memory for batches of up to `max_rows` rows, allocated once so the batch loop
// never allocates. One workspace serves one batch at a time.
class MlpWorkspace {
 public:
  MlpWorkspace(const MlpShape& shape, int max_rows);

  int max_rows() const { return max_rows_; }
  // Where the caller puts a batch: rows × inputs features and rows labels.
  float* input() { return activations_[0].data(); }
  int32_t* labels() { return labels_.data(); }

 private:
  friend class MlpModel;
  int max_rows_;
  std::vector<std::vector<float>> activations_;  // [0] input, [l+1] output of layer l
  std::vector<float> delta_a_, delta_b_;         // ∂loss/∂(pre-activation), ping-pong
  std::vector<int32_t> labels_;
};

struct MlpBatchStats {
  double loss_sum = 0;  // summed over rows
  int64_t correct = 0;
  int64_t rows = 0;
};

class MlpModel {
 public:
  // Called during backward() once layer `layer`'s gradients are final.
  using LayerGradientsReady = std::function<void(int layer, std::span<float> gradients)>;

  explicit MlpModel(const MlpShape& shape);

  // He initialisation (N(0, 2/fan_in)) for ReLU layers, N(0, 1/fan_in) for the output
  // layer, zero biases; a pure function of the seed.
  void initialize(uint64_t seed);

  const MlpShape& shape() const { return shape_; }
  std::span<float> weights() { return weights_; }
  std::span<const float> weights() const { return weights_; }
  std::span<const float> gradients() const { return gradients_; }
  std::span<float> layer_gradients(int layer);

  // Forward pass, softmax cross-entropy and backward pass on the batch in `ws` (input and
  // labels filled by the caller). Leaves in gradients() the gradient of the loss summed
  // over the rows and divided by `mean_over` (0: rows, the batch's mean loss). A rank of a
  // data-parallel trial passes the global batch's row count, so that the sum of the ranks'
  // gradients is the global batch's mean. rows 0 (a rank whose shard of a short last batch
  // is empty) gives zero gradients, still handed to on_ready layer by layer, so every rank
  // issues the same collectives. REQUIRES: 0 <= rows <= ws.max_rows(); labels in
  // [0, classes).
  MlpBatchStats forward_backward(MlpWorkspace& ws, int rows,
                                 const LayerGradientsReady& on_ready = {}, int mean_over = 0);

  // Forward pass and loss only.
  MlpBatchStats evaluate(MlpWorkspace& ws, int rows) const;

 private:
  // Runs the layers; returns the logits (rows × classes) inside ws.
  float* forward(MlpWorkspace& ws, int rows) const;
  void backward(MlpWorkspace& ws, int rows, const LayerGradientsReady& on_ready);
  const float* layer_weights(int layer) const { return weights_.data() + offsets_[layer]; }

  MlpShape shape_;
  std::vector<size_t> offsets_;  // start of each layer's [W, b] in the flat buffers
  std::vector<float> weights_;
  std::vector<float> gradients_;
};

}  // namespace cairn
