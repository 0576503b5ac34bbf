// data/: TensorDataset, ByteImageDataset, DataLoader (order, determinism by step, prefetch,
// shards, errors), the image transforms and the IDX reader.
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "data/data.h"
#include "tests/helpers.h"

using namespace xg;

namespace {

// n examples whose input (1,2,2) is filled with the example's index.
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  std::vector<double> v;
  std::vector<int64_t> targets;
  for (int64_t i = 0; i < n; ++i) {
    v.insert(v.end(), 4, static_cast<double>(i));
    targets.push_back(i % 10);
  }
  return std::make_shared<data::TensorDataset>(from_vector(v, {n, 1, 2, 2}, f32), targets);
}

std::vector<int64_t> rows_of(const data::Batch& b) {
  std::vector<int64_t> ids;
  for (int64_t r = 0; r < b.input.size(0); ++r) ids.push_back(static_cast<int64_t>(b.input.at({r, 0, 0, 0})));
  return ids;
}

// A dataset that fails on one example.
struct Faulty : data::Dataset {
  int64_t size() const override { return 10; }
  Shape input_shape() const override { return {2}; }
  data::Example get(int64_t i) const override {
    if (i == 7) throw std::runtime_error("example 7 is unreadable");
    return {zeros({2}), i};
  }
};

}  // namespace

TEST_CASE("DataLoader: each epoch visits every example once, in an order drawn from the seed and the epoch") {
  auto d = numbered(10);
  data::LoaderOptions o;
  o.batch_size = 4, o.seed = 3;
  data::DataLoader loader(d, o);
  CHECK(loader.batches_per_epoch() == 3);
  std::vector<int64_t> epoch1, epoch2;
  for (int64_t s = 1; s <= 3; ++s) {
    const data::Batch b = loader.batch(s);
    CHECK(b.indices == rows_of(b));
    CHECK(b.target.dtype() == i64);
    for (size_t r = 0; r < b.indices.size(); ++r) CHECK(b.target.at({static_cast<int64_t>(r)}) == b.indices[r] % 10);
    epoch1.insert(epoch1.end(), b.indices.begin(), b.indices.end());
  }
  for (int64_t s = 4; s <= 6; ++s) {
    const auto ids = loader.batch(s).indices;
    epoch2.insert(epoch2.end(), ids.begin(), ids.end());
  }
  CHECK(epoch1.size() == 10);  // the last batch is short: 4 + 4 + 2
  CHECK(std::set<int64_t>(epoch1.begin(), epoch1.end()).size() == 10);
  CHECK(std::set<int64_t>(epoch2.begin(), epoch2.end()).size() == 10);
  CHECK(epoch1 != epoch2);
  o.shuffle = false, o.drop_last = true;
  data::DataLoader plain(d, o);
  CHECK(plain.batches_per_epoch() == 2);
  CHECK(plain.batch(2).indices == std::vector<int64_t>{4, 5, 6, 7});
  CHECK(plain.batch(3).indices == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("DataLoader: a step's batch does not depend on prefetching, resuming or the order of calls") {
  auto d = numbered(37);
  data::LoaderOptions o;
  o.batch_size = 5, o.seed = 11;
  const data::Transform noise = [](const Tensor& x, Generator& g) { return x + g.uniform(); };
  data::DataLoader ahead(d, o, noise);
  o.prefetch = 0;
  data::DataLoader inline_(d, o, noise), resumed(d, o, noise);
  for (int64_t s = 1; s <= 20; ++s) {
    const data::Batch a = ahead.batch(s), b = inline_.batch(s);
    CHECK(a.indices == b.indices);
    CHECK(a.input.to_vector() == b.input.to_vector());
  }
  CHECK(resumed.batch(17).input.to_vector() == inline_.batch(17).input.to_vector());
  CHECK(ahead.batch(3).indices == inline_.batch(3).indices);  // a jump back
}

TEST_CASE("DataLoader: shards of rank 0 and 1 make up the global batch of one process") {
  auto d = numbered(20);
  data::LoaderOptions o;
  o.batch_size = 7, o.seed = 5;
  data::DataLoader whole(d, o);
  o.world = 2;
  data::DataLoader r0(d, o);
  o.rank = 1;
  data::DataLoader r1(d, o);
  for (int64_t s = 1; s <= 6; ++s) {
    const data::Batch a = r0.batch(s), b = r1.batch(s), w = whole.batch(s);
    std::vector<int64_t> both = a.indices;
    both.insert(both.end(), b.indices.begin(), b.indices.end());
    CHECK(both == w.indices);
    CHECK(a.global_size == w.global_size);
    CHECK(a.indices.size() == static_cast<size_t>(w.global_size / 2));
  }
}

TEST_CASE("DataLoader: bad options and a failing example are reported by name") {
  auto d = numbered(10);
  data::LoaderOptions o;
  o.batch_size = 11;
  CHECK(XG_THROW_MESSAGE(data::DataLoader(d, o), std::invalid_argument) ==
        "DataLoader: batch_size 11: expected in [1, 10] (at least one example per process, at most the dataset's 10)");
  o.batch_size = 3, o.world = 2, o.rank = 2;
  CHECK(XG_THROW_MESSAGE(data::DataLoader(d, o), std::invalid_argument) ==
        "DataLoader: rank 2 of world 2: expected world >= 1 and 0 <= rank < world");
  o.rank = 0, o.batch_size = 9;
  CHECK(XG_THROW_MESSAGE(data::DataLoader(d, o), std::invalid_argument) ==
        "DataLoader: the last batch of an epoch holds 1 examples, fewer than the 2 processes: set drop_last or "
        "another batch_size");
  o = {};
  o.batch_size = 2, o.prefetch = -1;
  CHECK(XG_THROW_MESSAGE(data::DataLoader(d, o), std::invalid_argument) == "DataLoader: prefetch -1: expected in [0, 64]");
  o.prefetch = 3, o.shuffle = false;
  data::DataLoader faulty(std::make_shared<Faulty>(), o);
  CHECK(faulty.batch(1).indices == std::vector<int64_t>{0, 1});  // prefetches 2, 3 and 4 (which fails)
  CHECK(faulty.batch(3).indices == std::vector<int64_t>{4, 5});
  CHECK(XG_THROW_MESSAGE(faulty.batch(4), std::runtime_error) == "example 7 is unreadable");
  CHECK(faulty.batch(5).indices == std::vector<int64_t>{8, 9});
  CHECK(XG_THROW_MESSAGE(faulty.batch(0), std::invalid_argument) == "DataLoader: step 0: expected at least 1");
}

TEST_CASE("DataLoader: an example of another shape is refused, even with the same number of elements") {
  data::LoaderOptions o;
  o.batch_size = 4, o.shuffle = false, o.prefetch = 0;
  // Example 2 comes out of the transform as (2,1,2) instead of (1,2,2).
  data::DataLoader loader(numbered(8), o, [](const Tensor& x, Generator&) {
    return x.at({0, 0, 0}) == 2.0 ? reshape(x, {2, 1, 2}) : x;
  });
  CHECK(XG_THROW_MESSAGE(loader.batch(1), std::runtime_error) ==
        "DataLoader: example 2 has the input (2,1,2), unlike the batch's first (4,1,2,2)");
  CHECK(rows_of(loader.batch(2)) == std::vector<int64_t>{4, 5, 6, 7});
}

TEST_CASE("Subset: some examples of a dataset, in the order given, checked against its size") {
  auto d = numbered(10);
  data::Subset s(d, {7, 2, 9});
  CHECK(s.size() == 3);
  CHECK(s.get(1).input.at({0, 0, 0}) == 2.0);
  CHECK(s.get(2).target == 9);
  CHECK(s.input_shape() == Shape{1, 2, 2});
  auto page = data::Subset::range(d, 8, 20);  // the end clamped to the 10 examples
  CHECK(page->indices() == std::vector<int64_t>{8, 9});
  data::LoaderOptions o;
  o.batch_size = 2, o.shuffle = false;
  CHECK(rows_of(data::DataLoader(page, o).batch(1)) == std::vector<int64_t>{8, 9});
  CHECK(XG_THROW_MESSAGE(data::Subset(d, {3, 10}), std::invalid_argument) ==
        "Subset: index 10 is outside the dataset's [0, 10)");
  CHECK(XG_THROW_MESSAGE(data::Subset::range(d, 10, 12), std::invalid_argument) ==
        "Subset::range: [10, 10) holds no example of a dataset of 10");
  CHECK(XG_THROW_MESSAGE(data::Subset(nullptr, {}), std::invalid_argument) == "Subset: the dataset is null");
}

TEST_CASE("ByteImageDataset: images kept as bytes read as float32 byte / 255, checked by name") {
  std::vector<uint8_t> px(3 * 2 * 2 * 2);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 10);
  const data::ByteImageDataset d(px, {2, 2, 2}, {4, 5, 6});
  CHECK(d.size() == 3);
  CHECK(d.input_shape() == Shape{2, 2, 2});
  const data::Example e = d.get(1);
  CHECK(e.target == 5);
  CHECK(e.input.dtype() == f32);
  CHECK(e.input.shape() == Shape{2, 2, 2});
  CHECK(e.input.at({0, 0, 0}) == doctest::Approx(80.0 / 255).epsilon(1e-7));
  CHECK(e.input.at({1, 1, 1}) == doctest::Approx(150.0 / 255).epsilon(1e-7));
  const Tensor two = d.images(1, 3);
  CHECK(two.shape() == Shape{2, 2, 2, 2});
  CHECK(two.at({1, 1, 1, 1}) == doctest::Approx(230.0 / 255).epsilon(1e-7));
  // The loader batches it like any dataset.
  data::LoaderOptions o;
  o.batch_size = 3, o.shuffle = false;
  const data::Batch b = data::DataLoader(std::make_shared<data::ByteImageDataset>(d), o).batch(1);
  CHECK(b.input.at({2, 0, 0, 1}) == doctest::Approx(170.0 / 255).epsilon(1e-7));
  CHECK(XG_THROW_MESSAGE(data::ByteImageDataset(px, {2, 2, 2}, {1, 2}), std::invalid_argument) ==
        "ByteImageDataset: 24 bytes are not 2 images (one per target) of (2,2,2)");
  CHECK(XG_THROW_MESSAGE(data::ByteImageDataset(px, {24}, {1}), std::invalid_argument) ==
        "ByteImageDataset: expected an image shape (C,H,W) of positive sizes, got (24,)");
  CHECK(XG_THROW_MESSAGE(d.images(2, 4), std::invalid_argument) ==
        "ByteImageDataset::images: [2, 4) is not a range of images within [0, 3)");
}

TEST_CASE("image transforms: crop, flip, normalise and erase as torchvision's, refusing bad arguments") {
  Generator g(1);
  const Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3}, f32);
  CHECK(data::random_crop({2, 3})(x, g).to_vector() == x.to_vector());  // the whole image: nothing to draw
  const Tensor crop = data::random_crop({2, 2}, 1)(x, g);
  CHECK(crop.shape() == Shape{2, 2, 2});
  CHECK(data::random_horizontal_flip(1.0)(x, g).to_vector() ==
        std::vector<double>{3, 2, 1, 6, 5, 4, 9, 8, 7, 12, 11, 10});
  CHECK(data::random_horizontal_flip(0.0)(x, g).to_vector() == x.to_vector());
  const auto n = data::normalize({1, 2}, {2, 4})(x, g).to_vector();
  CHECK(n[0] == 0.0);
  CHECK(n[6] == 1.25);  // (7 - 2) / 4
  const Tensor ones_ = ones({1, 10, 10});
  const auto erased = data::random_erasing(1.0, {0.1, 0.2}, {1, 1})(ones_, g).to_vector();
  const auto zeroed = std::count(erased.begin(), erased.end(), 0.0);
  CHECK(zeroed >= 9);  // a square of 10% to 20% of 100 pixels, sides rounded
  CHECK(zeroed <= 25);
  CHECK(data::compose({data::random_horizontal_flip(1.0), data::random_horizontal_flip(1.0)})(x, g).to_vector() ==
        x.to_vector());
  CHECK(XG_THROW_MESSAGE(data::random_crop({4, 4})(x, g), ShapeError) ==
        "random_crop: the crop 4x4 is larger than the padded image 2x3");
  CHECK(XG_THROW_MESSAGE(data::normalize({1}, {1})(x, g), ShapeError) ==
        "normalize: 1 channels' mean and std for an image of 2 channels");
  CHECK(XG_THROW_MESSAGE(data::normalize({1}, {0}), std::invalid_argument) ==
        "normalize: every std must be positive, got 0.000000");
  CHECK(XG_THROW_MESSAGE(data::random_horizontal_flip(1.5), std::invalid_argument) ==
        "random_horizontal_flip: p 1.500000: expected in [0, 1]");
  CHECK(XG_THROW_MESSAGE(data::random_crop({2, 2})(ones({4}), g), ShapeError) ==
        "random_crop: expected a float (C,H,W) image, got (4,)");
}

TEST_CASE("IDX files: plain and gzip read alike, malformed ones are refused with the reason") {
  const std::string idx = std::string("\0\0\x08\x02\0\0\0\x02\0\0\0\x03", 12) + "abcdef";
  const data::IdxArray a = data::parse_idx(idx, "t.idx");
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(std::string(a.values.begin(), a.values.end()) == "abcdef");
  const std::string path = std::string(XG_TEST_TMPDIR) + "/t.idx.gz";
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, idx.data(), static_cast<unsigned>(idx.size()));
  gzclose(f);
  CHECK(data::read_idx(path).values == a.values);
  auto why = [](const std::string& bytes) { return XG_THROW_MESSAGE(data::parse_idx(bytes, "f"), FormatError); };
  CHECK(why("PK\x03\x04") == "f: not an IDX file of unsigned bytes: it does not start with the IDX magic number 00 00 TYPE RANK");
  CHECK(why(std::string("\0\0\x0d\x01", 4)) == "f: not an IDX file of unsigned bytes: element type 13 (only 8, unsigned byte, is read)");
  CHECK(why(std::string("\0\0\x08\x05", 4)) == "f: not an IDX file of unsigned bytes: rank 5 (expected 1 to 4)");
  CHECK(why(idx.substr(0, 10)) == "f: not an IDX file of unsigned bytes: the dimensions are cut short");
  CHECK(why(idx.substr(0, 15)) == "f: not an IDX file of unsigned bytes: the dimensions give 6 values, the file holds 3");
  CHECK(why(idx + "g") == "f: not an IDX file of unsigned bytes: the dimensions give 6 values, the file holds 7");
  CHECK(why(std::string("\0\0\x08\x01\xff\xff\xff\xff", 8)) ==
        "f: not an IDX file of unsigned bytes: more than 2147483648 values");
  CHECK(why(std::string("\x1f\x8b\x08\0\0\0", 6)) == "f: the gzip data ends early");
  CHECK(XG_THROW_MESSAGE(data::read_idx("/nonexistent/x.idx"), FormatError) == "/nonexistent/x.idx: cannot open the file");
}
