#include "apps/vision/fashion_mnist.h"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/serialize.h"
#include "data/idx.h"

namespace xg::vision {

namespace {

// DIR/NAME.gz, or DIR/NAME when only the uncompressed file is there.
std::string find_file(const std::string& dir, const std::string& name) {
  for (const std::string& p : {dir + "/" + name + ".gz", dir + "/" + name})
    if (std::filesystem::is_regular_file(p)) return p;
  throw std::runtime_error(fmt::format("{}: no {}.gz (install Debian's Fashion-MNIST: apt-get install "
                                       "dataset-fashion-mnist)",
                                       dir, name));
}

}  // namespace

std::shared_ptr<const data::ByteImageDataset> load_fashion_mnist(const std::string& dir, bool train, int64_t limit) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string image_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  data::IdxArray images = data::read_idx(image_path);
  const data::IdxArray labels = data::read_idx(label_path);
  if (images.shape.size() != 3 || images.shape[1] != 28 || images.shape[2] != 28)
    throw FormatError(fmt::format("{}: expected (N,28,28) images, got {} dimensions", image_path, images.shape.size()));
  if (labels.shape.size() != 1 || labels.shape[0] != images.shape[0])
    throw FormatError(fmt::format("{}: expected one label for each of the {} images of {}", label_path,
                                  images.shape[0], image_path));
  const int64_t n = limit > 0 ? std::min(limit, images.shape[0]) : images.shape[0];
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = labels.values[static_cast<size_t>(i)];
    if (label > 9) throw FormatError(fmt::format("{}: label {} of image {} is not a class 0..9", label_path, label, i));
    targets.push_back(label);
  }
  images.values.resize(static_cast<size_t>(n * 28 * 28));
  images.values.shrink_to_fit();
  return std::make_shared<data::ByteImageDataset>(std::move(images.values), Shape{1, 28, 28}, std::move(targets));
}

}  // namespace xg::vision
