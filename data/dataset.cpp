#include "data/dataset.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/require.h"

namespace xg::data {

namespace {

// The bytes of a float32 or float64 tensor (the constructor refused int64).
const char* bytes_of(const Tensor& t) {
  return t.dtype() == f32 ? reinterpret_cast<const char*>(t.data<float>()) : reinterpret_cast<const char*>(t.data<double>());
}

// Bytes 0..255 as floats 0..1.
void to_unit(const uint8_t* in, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]) / 255.0f;
}

}  // namespace

TensorDataset::TensorDataset(Tensor inputs, std::vector<int64_t> targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  require(inputs_.defined() && inputs_.dim() >= 1 && inputs_.size(0) == static_cast<int64_t>(targets_.size()),
          "expected inputs (N, ...) with N = the number of targets (" + std::to_string(targets_.size()) + "), got " +
              (inputs_.defined() ? shape_str(inputs_.shape()) : std::string("undefined inputs")),
          "TensorDataset: ");
  require(inputs_.dtype() != i64, "TensorDataset: inputs must be float32 or float64");
  inputs_ = inputs_.detach();
}

Shape TensorDataset::input_shape() const { return Shape(inputs_.shape().begin() + 1, inputs_.shape().end()); }

Example TensorDataset::get(int64_t index) const {
  Tensor row = empty(input_shape(), inputs_.dtype());
  const int64_t bytes = row.numel() * dtype_size(row.dtype());
  std::memcpy(const_cast<char*>(bytes_of(row)), bytes_of(inputs_) + index * bytes, static_cast<size_t>(bytes));
  return {row, targets_[static_cast<size_t>(index)]};
}

ByteImageDataset::ByteImageDataset(std::vector<uint8_t> pixels, Shape image_shape, std::vector<int64_t> targets)
    : pixels_(std::move(pixels)), image_shape_(std::move(image_shape)), targets_(std::move(targets)) {
  const bool chw = image_shape_.size() == 3 &&
                   std::all_of(image_shape_.begin(), image_shape_.end(), [](int64_t d) { return d > 0; });
  require(chw, "ByteImageDataset: expected an image shape (C,H,W) of positive sizes, got " + shape_str(image_shape_));
  image_size_ = image_shape_[0] * image_shape_[1] * image_shape_[2];
  require(pixels_.size() == targets_.size() * static_cast<size_t>(image_size_),
          std::to_string(pixels_.size()) + " bytes are not " + std::to_string(targets_.size()) +
              " images (one per target) of " + shape_str(image_shape_),
          "ByteImageDataset: ");
}

Tensor ByteImageDataset::images(int64_t begin, int64_t end) const {
  require(begin >= 0 && begin < end && end <= size(),
          "[" + std::to_string(begin) + ", " + std::to_string(end) + ") is not a range of images within [0, " +
              std::to_string(size()) + ")",
          "ByteImageDataset::images: ");
  Shape shape{end - begin};
  shape.insert(shape.end(), image_shape_.begin(), image_shape_.end());
  Tensor out = empty(shape, f32);
  to_unit(pixels_.data() + begin * image_size_, (end - begin) * image_size_, out.data<float>());
  return out;
}

Example ByteImageDataset::get(int64_t index) const {
  Tensor image = empty(image_shape_, f32);
  to_unit(pixels_.data() + index * image_size_, image_size_, image.data<float>());
  return {image, targets_[static_cast<size_t>(index)]};
}

Subset::Subset(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> indices)
    : dataset_(std::move(dataset)), indices_(std::move(indices)) {
  require(dataset_ != nullptr, "Subset: the dataset is null");
  const int64_t n = dataset_->size();
  for (int64_t i : indices_)
    require(i >= 0 && i < n,
            "index " + std::to_string(i) + " is outside the dataset's [0, " + std::to_string(n) + ")", "Subset: ");
}

std::shared_ptr<Subset> Subset::range(std::shared_ptr<const Dataset> dataset, int64_t begin, int64_t end) {
  require(dataset != nullptr, "Subset: the dataset is null");
  end = std::min(end, dataset->size());
  require(begin >= 0 && begin < end,
          "[" + std::to_string(begin) + ", " + std::to_string(end) + ") holds no example of a dataset of " +
              std::to_string(dataset->size()),
          "Subset::range: ");
  std::vector<int64_t> indices(static_cast<size_t>(end - begin));
  std::iota(indices.begin(), indices.end(), begin);
  return std::make_shared<Subset>(std::move(dataset), std::move(indices));
}

}  // namespace xg::data
