// fmt support: fmt::print("{}", tensor).
#pragma once
#include <fmt/ostream.h>

#include "autograd/tensor.h"

template <>
struct fmt::formatter<xg::Tensor> : fmt::ostream_formatter {};
