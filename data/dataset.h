// Datasets: what a DataLoader (data/loader.h) draws examples from.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "autograd/tensor.h"

namespace xg::data {

// One example: its input (an image (C,H,W), a sequence, ...) and its
// target, a class id.
struct Example {
  Tensor input;        // float32 or float64, any shape
  int64_t target = 0;  // a class id
};

// A numbered collection of examples, as torch.utils.data.Dataset. get() is
// called from the loader's prefetch thread while the model trains: it must
// only read (a const method over data loaded up front).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;  // the number of examples
  // Example `index` in [0, size()); the loader checks the range first.
  virtual Example get(int64_t index) const = 0;
  // Every input's shape (all alike); the loader allocates its batches from it.
  virtual Shape input_shape() const = 0;
};

// Examples kept in memory: inputs stacked as (N, ...) and N targets, as
// torch.utils.data.TensorDataset. get(i) copies row i (float32 or float64).
class TensorDataset : public Dataset {
 public:
  // Throws std::invalid_argument when the inputs have no leading dimension
  // or it is not the number of targets.
  TensorDataset(Tensor inputs, std::vector<int64_t> targets);
  int64_t size() const override { return static_cast<int64_t>(targets_.size()); }
  Example get(int64_t index) const override;
  Shape input_shape() const override;
  const Tensor& inputs() const { return inputs_; }
  const std::vector<int64_t>& targets() const { return targets_; }

 private:
  Tensor inputs_;
  std::vector<int64_t> targets_;
};

// Images kept as bytes, as torchvision's datasets keep them: get(i) gives
// image i as float32 in [0, 1] (byte / 255, torchvision's ToTensor), so a set
// takes a quarter of the memory of the same images in a float32
// TensorDataset (Fashion-MNIST's training set: 47 MB instead of 188 MB).
class ByteImageDataset : public Dataset {
 public:
  // `pixels` holds N images of `image_shape` (C,H,W) in a row; throws
  // std::invalid_argument unless image_shape has 3 positive sizes and
  // pixels.size() is N times their product, N = the number of targets.
  ByteImageDataset(std::vector<uint8_t> pixels, Shape image_shape, std::vector<int64_t> targets);
  int64_t size() const override { return static_cast<int64_t>(targets_.size()); }
  Example get(int64_t index) const override;
  Shape input_shape() const override { return image_shape_; }
  // Images begin..end-1 as one float32 (end - begin, C, H, W) tensor in [0, 1];
  // throws std::invalid_argument unless 0 <= begin < end <= size().
  Tensor images(int64_t begin, int64_t end) const;
  const std::vector<int64_t>& targets() const { return targets_; }

 private:
  std::vector<uint8_t> pixels_;
  Shape image_shape_;
  int64_t image_size_ = 0;  // bytes of one image
  std::vector<int64_t> targets_;
};

// Some examples of another dataset, in the order given, as
// torch.utils.data.Subset: no example is copied until get() asks for it.
class Subset : public Dataset {
 public:
  // Throws std::invalid_argument for a null dataset or an index outside
  // [0, dataset->size()).
  Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices);
  // Examples begin..end-1 of `dataset`, end clamped to its size: the first
  // N test images, a page of predictions.
  static std::shared_ptr<Subset> range(std::shared_ptr<const Dataset> dataset, int64_t begin, int64_t end);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override { return dataset_->get(indices_[static_cast<size_t>(index)]); }
  Shape input_shape() const override { return dataset_->input_shape(); }
  const std::vector<int64_t>& indices() const { return indices_; }  // positions in the whole dataset

 private:
  std::shared_ptr<const Dataset> dataset_;
  std::vector<int64_t> indices_;
};

}  // namespace xg::data
