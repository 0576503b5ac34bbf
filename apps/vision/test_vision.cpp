// apps/vision: the Fashion-MNIST reader's refusals, the options' checks, and
// the test-set scoring (accuracy and confusion matrix agree).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "apps/vision/vision.h"
#include "tests/helpers.h"

using namespace xg;
using namespace xg::vision;

namespace {

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string idx_header(std::vector<uint32_t> dims) {
  std::string s("\0\0\x08", 3);
  s += static_cast<char>(dims.size());
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) s += static_cast<char>((d >> shift) & 0xff);
  return s;
}

}  // namespace

TEST_CASE("vision: Fashion-MNIST files are found, read and refused by name") {
  const std::string dir = std::string(XG_TEST_TMPDIR) + "/fmnist";
  std::filesystem::create_directories(dir);
  CHECK(XG_THROW_MESSAGE(load_fashion_mnist(dir + "/none", false), std::runtime_error) ==
        dir + "/none: no t10k-images-idx3-ubyte.gz (install Debian's Fashion-MNIST: apt-get install dataset-fashion-mnist)");
  write(dir + "/t10k-images-idx3-ubyte", idx_header({2, 28, 28}) + std::string(2 * 784, '\xff'));
  write(dir + "/t10k-labels-idx1-ubyte", idx_header({2}) + std::string("\x03\x09", 2));
  const auto s = load_fashion_mnist(dir, false);
  CHECK(s->images(0, 2).shape() == Shape{2, 1, 28, 28});
  CHECK(s->get(1).input.at({0, 27, 27}) == 1.0);
  CHECK(s->targets() == std::vector<int64_t>{3, 9});
  write(dir + "/t10k-labels-idx1-ubyte", idx_header({2}) + std::string("\x03\x0a", 2));
  CHECK(XG_THROW_MESSAGE(load_fashion_mnist(dir, false), FormatError) ==
        dir + "/t10k-labels-idx1-ubyte: label 10 of image 1 is not a class 0..9");
  write(dir + "/t10k-labels-idx1-ubyte", idx_header({3}) + std::string("\x03\x01\x02", 3));
  CHECK(XG_THROW_MESSAGE(load_fashion_mnist(dir, false), FormatError) ==
        dir + "/t10k-labels-idx1-ubyte: expected one label for each of the 2 images of " + dir +
            "/t10k-images-idx3-ubyte");
}

TEST_CASE("vision: options are checked by name, and accuracy agrees with the confusion matrix") {
  VisionOptions o;
  o.model = models::ImageKind::cnn;
  o.erase = 1.5;
  CHECK(XG_THROW_MESSAGE(o.validate(), std::invalid_argument) ==
        "VisionOptions: erase 1.5: expected a probability from 0 to 1");
  o.erase = 0.5;
  o.augment = false;
  CHECK(XG_THROW_MESSAGE(o.validate(), std::invalid_argument) ==
        "VisionOptions: erase 0.5: random erasing is an augmentation, and augment is off");
  o.augment = true;
  o.erase = 0;
  o.cnn.hidden = 8;
  const Classifier c = build_classifier(o);
  CHECK(c.config.to_metadata().at("model") == "cnn");
  Generator g(1);
  std::vector<int64_t> labels;
  for (int64_t i = 0; i < 40; ++i) labels.push_back(i % 10);
  auto all = std::make_shared<data::TensorDataset>(rand({40, 1, 28, 28}, g, f32), labels);
  const TestResult r = test_classifier(*c.module, data::Subset::range(all, 0, 30), 7);
  CHECK(r.images == 30);
  // A page further on scores those images as the whole set does.
  const TestResult page = test_classifier(*c.module, data::Subset::range(all, 25, 60), 4);
  const TestResult whole = test_classifier(*c.module, all);
  REQUIRE(page.images == 15);
  CHECK(std::equal(page.predicted.begin(), page.predicted.end(), whole.predicted.begin() + 25));
  int64_t diagonal = 0, total = 0;
  for (size_t t = 0; t < 10; ++t)
    for (size_t p = 0; p < 10; ++p) total += r.confusion[t][p], diagonal += t == p ? r.confusion[t][p] : 0;
  CHECK(total == 30);
  CHECK(diagonal == r.correct);
  CHECK(r.predicted.size() == 30);
  CHECK(r.confusion_lines().size() == 11);
}

TEST_CASE("vision: random erasing sets one box of the normalised image to 0, the data's mean, and only with erase > 0") {
  Generator g(3);
  const Tensor image = rand({1, 28, 28}, g, f32);  // no pixel normalises to exactly 0
  auto erased_images = [&](double erase) {
    const data::Transform t = train_transform(true, erase);
    Generator draws(5);
    int erased = 0;
    for (int i = 0; i < 20; ++i) {
      const std::vector<double> v = t(image, draws).to_vector();
      int64_t top = 28, bottom = -1, left = 28, right = -1, zeros = 0;
      for (int64_t p = 0; p < 784; ++p) {
        if (v[static_cast<size_t>(p)] != 0.0) continue;
        ++zeros;
        top = std::min(top, p / 28), bottom = std::max(bottom, p / 28);
        left = std::min(left, p % 28), right = std::max(right, p % 28);
      }
      if (zeros == 0) continue;
      ++erased;
      const int64_t h = bottom - top + 1, w = right - left + 1;
      CHECK(zeros == h * w);  // one box, all of it 0
      CHECK(h < 28);
      CHECK(w < 28);
      CHECK(zeros >= 14);   // 2% of 784 pixels, its sides rounded (2 x 7 at aspect 3.3)
      CHECK(zeros <= 300);  // 33%, its sides rounded
    }
    return erased;
  };
  CHECK(erased_images(0) == 0);
  CHECK(erased_images(1) >= 15);  // an image stays whole only when no drawn box fits in 10 tries
}

TEST_CASE("vision: the step's loss is the label-smoothed cross-entropy of its batch when label_smoothing > 0") {
  const std::string dir = std::string(XG_TEST_TMPDIR) + "/fmnist_smoothing";
  std::filesystem::create_directories(dir);
  Generator bytes(3);
  auto images = [&](uint32_t n) {
    std::string s = idx_header({n, 28, 28});
    for (uint32_t i = 0; i < n * 784; ++i) s += static_cast<char>(bytes.engine()() & 0xff);
    return s;
  };
  auto labels = [](uint32_t n) {
    std::string s = idx_header({n});
    for (uint32_t i = 0; i < n; ++i) s += static_cast<char>(i % 10);
    return s;
  };
  write(dir + "/train-images-idx3-ubyte", images(16));
  write(dir + "/train-labels-idx1-ubyte", labels(16));
  write(dir + "/t10k-images-idx3-ubyte", images(4));
  write(dir + "/t10k-labels-idx1-ubyte", labels(4));
  VisionOptions o;
  o.data = dir;
  o.model = models::ImageKind::cnn;
  o.cnn.hidden = 8;
  o.cnn.dropout = 0;
  o.augment = false;
  o.batch_size = 8;
  o.label_smoothing = 0.3;
  VisionJob job(o);
  train::Shard shard;
  shard.step = 2;
  const double loss = job.loss(shard).loss.item();
  // The same batch from a loader of the job's settings, through the same model.
  data::LoaderOptions lo;
  lo.batch_size = 8, lo.seed = o.seed, lo.drop_last = true;
  data::DataLoader loader(load_fashion_mnist(dir, true), lo, eval_transform());
  const data::Batch b = loader.batch(2);
  const Tensor logits = job.model().forward(b.input);
  const double smoothed = cross_entropy(logits, b.target, CrossEntropyLossOptions().label_smoothing(0.3)).item();
  const double plain = cross_entropy(logits, b.target).item();
  CHECK(loss == doctest::Approx(smoothed).epsilon(1e-6));
  CHECK(std::abs(smoothed - plain) > 1e-3);
  o.label_smoothing = 1;
  CHECK(XG_THROW_MESSAGE(o.validate(), std::invalid_argument) ==
        "VisionOptions: label_smoothing 1: expected a number from 0 to 0.999");
}
