// Recurrent layers as ONNX's own RNN, LSTM and GRU operators.
#include "onnx/detail/graph.h"

namespace xg::onnx::detail {

void add_recurrent_emitters(std::map<std::string, Emitter>&) {}

}  // namespace xg::onnx::detail
