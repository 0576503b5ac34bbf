#include "apps/vision/pictures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/ops.h"

namespace xg::vision {

namespace {

constexpr int64_t kSide = 28, kCell = kSide + 1;  // an image and its gap

std::string label_of(int64_t c) {
  std::string s = kClassNames[static_cast<size_t>(c)];
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("vision picture: cannot write " + path);
}

// The grid as text: pixel(i, r, c) for image i, row r, column c of it; the
// gaps are 1 (white).
template <class Pixel>
std::string grid_text(Pixel pixel) {
  std::string text;
  for (int64_t y = 0; y < kGridRows * kCell; ++y) {
    for (int64_t x = 0; x < kGridCols * kCell; ++x) {
      const int64_t i = (y / kCell) * kGridCols + x / kCell, r = y % kCell, c = x % kCell;
      const double v = r == kSide || c == kSide ? 1.0 : pixel(i, r, c);
      text += fmt::format("{}{:.3f}", x ? " " : "", v);
    }
    text += "\n";
  }
  return text;
}

std::string confusion_text(const TestResult& r) {
  std::string text = "-";
  for (int64_t p = 0; p < 10; ++p) text += " " + label_of(p);
  text += "\n";
  for (size_t t = 0; t < 10; ++t) {
    int64_t total = 0;
    for (int64_t n : r.confusion[t]) total += n;
    text += label_of(static_cast<int64_t>(t));
    for (int64_t n : r.confusion[t]) text += fmt::format(" {:.4f}", total ? static_cast<double>(n) / total : 0.0);
    text += "\n";
  }
  return text;
}

// The class token's attention over the patches of the grid's images,
// averaged over heads, each image's scaled to [0, 1]: (images, P).
std::vector<std::vector<double>> class_attention(models::ViT& vit, const Tensor& images) {
  NoGradGuard no_grad;
  vit.eval();
  const Tensor a = mean(vit.class_attention(images), {1});  // (n, P)
  std::vector<std::vector<double>> out;
  for (int64_t i = 0; i < a.size(0); ++i) {
    std::vector<double> row = slice(a, 0, i, i + 1).to_vector();
    const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
    const double low = *lo, span = std::max(*hi - *lo, 1e-12);
    for (double& v : row) v = (v - low) / span;
    out.push_back(row);
  }
  return out;
}

}  // namespace

void write_pictures(const Classifier& classifier, const data::ByteImageDataset& test, const TestResult& result,
                    const std::string& dir) {
  const int64_t n = kGridRows * kGridCols;
  if (test.size() < n || static_cast<int64_t>(result.predicted.size()) < n)
    throw std::invalid_argument(fmt::format("vision picture: needs at least {} test images", n));
  write_file(dir + "/confusion.txt", confusion_text(result));
  const Tensor shown = test.images(0, n);  // (n,1,28,28) in [0, 1]
  const float* px = shown.data<float>();
  write_file(dir + "/grid.txt", grid_text([&](int64_t i, int64_t r, int64_t c) {
               return 1.0 - px[(i * kSide + r) * kSide + c];  // dark clothes on white
             }));
  std::string labels;
  for (int64_t i = 0; i < n; ++i)
    labels += fmt::format("{} {} {} {}\n", i / kGridCols, i % kGridCols, label_of(result.predicted[static_cast<size_t>(i)]),
                          label_of(test.targets()[static_cast<size_t>(i)]));
  write_file(dir + "/grid_labels.txt", labels);
  if (!classifier.vit) return;
  const Tensor images = (shown - recipe().pixel_mean) / recipe().pixel_std;
  const auto att = class_attention(*classifier.vit, images);
  const int64_t patch = classifier.vit->config().patch, side = kSide / patch;
  write_file(dir + "/attention.txt", grid_text([&](int64_t i, int64_t r, int64_t c) {
               return att[static_cast<size_t>(i)][static_cast<size_t>((r / patch) * side + c / patch)];
             }));
}

}  // namespace xg::vision
