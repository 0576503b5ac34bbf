// Fashion-MNIST (Zalando's 28x28 grey images of clothes, 10 classes) from
// the IDX files of Debian's dataset-fashion-mnist package.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace xg::vision {

inline const char* const kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// The classes by label, as the dataset's README names them.
inline const std::array<const char*, 10> kClassNames = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                        "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// The training (60,000 images) or test (10,000) split of `dir`: images
// (1,28,28) kept as bytes and read as float32 in [0, 1], their labels (0..9)
// as targets. `dir` holds train-images-idx3-ubyte.gz and the others (or the
// same without .gz); `limit` > 0 keeps the first `limit` images. Throws
// std::runtime_error naming the missing file and the package, and
// FormatError for a file that is not the data (IDX errors, counts that
// disagree, labels above 9, images not 28x28).
std::shared_ptr<const data::ByteImageDataset> load_fashion_mnist(const std::string& dir, bool train,
                                                                 int64_t limit = 0);

}  // namespace xg::vision
