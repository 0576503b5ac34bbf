// The data of the vision pictures as text files for gnuplot
// (scripts/plot_vision.sh draws them): the confusion matrix, a grid of test
// images with their predictions, and a ViT's attention from the class token.
#pragma once

#include <string>

#include "apps/vision/vision.h"

namespace xg::vision {

// Images in the grid: kGridRows x kGridCols of the first test images.
inline constexpr int64_t kGridRows = 4, kGridCols = 8;

// Writes into `dir` (which must exist):
//   confusion.txt   the confusion matrix, each true class's row as fractions
//                   (gnuplot's "matrix rowheaders columnheaders")
//   grid.txt        the first kGridRows x kGridCols test images as one
//                   matrix of grey levels, 1-pixel white gaps between them
//   grid_labels.txt one line per image: row column predicted true (class names)
//   attention.txt   (a ViT only) the grid again, each image's pixels replaced
//                   by the last block's attention from the class token to
//                   their patch, averaged over heads and scaled to [0, 1]
// Throws std::runtime_error naming a file it cannot write.
void write_pictures(const Classifier& classifier, const data::ByteImageDataset& test, const TestResult& result,
                    const std::string& dir);

}  // namespace xg::vision
