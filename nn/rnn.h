// Recurrent layers as in torch.nn: RNN (tanh or relu), LSTM and GRU, with
// their cells. Inputs are (T,B,C) as PyTorch's, or (B,T,C) with
// batch_first, or unbatched (T,C); states are (L*D,B,H) for L layers and D
// directions. The parameter names, shapes, gate order (LSTM i, f, g, o; GRU
// r, z, n) and initialisation are PyTorch's, so a state dict maps 1:1 to
// torch.nn.LSTM's.
//
//   nn::LSTM lstm(nn::RNNOptions(32, 64).batch_first(true), gen);
//   nn::RNNOutput r = lstm.forward(x, Tensor(), lengths);  // x (B,T,32): r.output (B,T,64), r.h_n, r.c_n (1,B,64)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"

namespace xg::nn {

// Which recurrence a layer or cell runs (xg::recurrence's cell, autograd/ops.h).
using RNNMode = RecurrentCell;

// The options of RNN, LSTM and GRU: torch.nn.RNN's arguments in LibTorch's
// form, the sizes in the constructor, the rest as setters with PyTorch's
// defaults.
struct RNNOptions {
  RNNOptions(int64_t input_size, int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}  // C, H
  XG_ARG(int64_t, input_size);                  // C
  XG_ARG(int64_t, hidden_size);                 // H
  XG_ARG(int64_t, num_layers) = 1;              // L
  XG_ARG(std::string, nonlinearity) = "tanh";   // RNN's: tanh or relu (LSTM and GRU refuse another)
  XG_ARG(bool, bias) = true;                    // bias_ih and bias_hh in every layer
  XG_ARG(bool, batch_first) = false;            // inputs and outputs (B,T,C) instead of (T,B,C)
  XG_ARG(double, dropout) = 0;                  // on each layer's output but the last, in training
  XG_ARG(bool, bidirectional) = false;          // a reverse direction too (D = 2)
};

// What a recurrent layer returns.
struct RNNOutput {
  // (T,B,D*H), or (B,T,D*H) with batch_first, or (T,D*H) unbatched: the last
  // layer's hidden state at every step, zero past a row's length
  Tensor output;
  Tensor h_n;     // (L*D,B,H): each layer and direction's last state (a row's own, with lengths)
  Tensor c_n;     // (L*D,B,H): the LSTM's last cell states; undefined for RNN and GRU
};

// One step of a recurrence, the cell of RNNCell, LSTMCell and GRUCell: the
// fused xg::recurrence over one step (the layers run it over all their
// steps at once). x_proj is x W_ih^T + b_ih (B,G*H); returns the new h, and
// for the LSTM the new c through `c` (which must then be defined).
Tensor rnn_step(RNNMode mode, const Tensor& x_proj, const Tensor& h, Tensor& c, const Tensor& w_hh,
                const Tensor& b_hh);

// The layers' common code: parameters weight_ih_l{k}[_reverse],
// weight_hh_l{k}[_reverse], bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse].
class RNNBase : public Module {
 public:
  // Checks the options (sizes >= 1, dropout in [0, 1)) and draws every
  // parameter from U(-1/sqrt(H), 1/sqrt(H)) as PyTorch does.
  RNNBase(RNNMode mode, const RNNOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_gen = nullptr);
  // x (T,B,C), (B,T,C) with batch_first, or (T,C) unbatched; h0 (and c0 for
  // the LSTM) (L*D,B,H) or (L*D,H) unbatched, zeros when undefined;
  // lengths: B values in 1..T (empty: every row is T long). A row's state
  // stops at its own length: outputs past it are zero, and the reverse
  // direction starts at its last element. Throws ShapeError or
  // std::invalid_argument naming the argument and the accepted range.
  // traced_lengths: the same lengths as a (B) tensor made by ops from a
  // graph's inputs, for an export trace (xg::recurrent_layer); usually none.
  RNNOutput forward(const Tensor& x, const Tensor& h0, const std::vector<int64_t>& lengths = {},
                    const Tensor& c0 = Tensor(), const Tensor& traced_lengths = Tensor());
  Tensor forward(const Tensor& x) override { return forward(x, Tensor()).output; }  // the output alone
  std::string type_name() const override;  // "LSTM(input_size=32, hidden_size=64, num_layers=1)"
  const RNNOptions& options() const { return opts_; }  // as constructed
  RNNMode mode() const { return mode_; }               // the recurrence

 private:
  RNNMode mode_;
  RNNOptions opts_;
  std::shared_ptr<Generator> drop_gen_;
  int64_t gates_;  // G: 1, 4 (LSTM) or 3 (GRU)
  // Per layer and direction (index k * D + d): W_ih, W_hh, b_ih, b_hh.
  std::vector<std::vector<Tensor>> weights_;
};

// torch.nn.RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu).
class RNN : public RNNBase {
 public:
  // options.nonlinearity() "tanh" or "relu" (anything else throws, naming both).
  RNN(const RNNOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit RNN(const RNNOptions& options) : RNN(options, default_generator()) {}  // from default_generator()
};

// torch.nn.LSTM: gates i, f, g, o; c' = f c + i g, h' = o tanh(c').
class LSTM : public RNNBase {
 public:
  // See RNNBase::RNNBase.
  LSTM(const RNNOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit LSTM(const RNNOptions& options) : LSTM(options, default_generator()) {}  // from default_generator()
};

// torch.nn.GRU: gates r, z, n; n = tanh(x_n + r (h W_hn^T + b_hn)),
// h' = (1 - z) n + z h.
class GRU : public RNNBase {
 public:
  // See RNNBase::RNNBase.
  GRU(const RNNOptions& options, Generator& gen, std::shared_ptr<Generator> dropout_gen = nullptr);
  explicit GRU(const RNNOptions& options) : GRU(options, default_generator()) {}  // from default_generator()
};

// One step as a module, as torch.nn.RNNCell / LSTMCell / GRUCell: parameters
// weight_ih (G*H,C), weight_hh (G*H,H), bias_ih and bias_hh (G*H).
class RNNCellBase : public Module {
 public:
  // input_size C and hidden_size H >= 1; U(-1/sqrt(H), 1/sqrt(H)) as PyTorch.
  RNNCellBase(RNNMode mode, int64_t input_size, int64_t hidden_size, Generator& gen, bool bias = true);
  // x (B,C), h (B,H) (zeros when undefined) -> h' (B,H). For the LSTM cell,
  // c (B,H) is read (zeros when undefined) and replaced by c'.
  Tensor step(const Tensor& x, const Tensor& h, Tensor& c);
  Tensor forward(const Tensor& x) override;  // step(x, zeros, zeros): the new h
  std::string type_name() const override;    // "LSTMCell(input_size=4, hidden_size=3)"

 private:
  RNNMode mode_;
  int64_t input_size_, hidden_size_;
  Tensor w_ih_, w_hh_, b_ih_, b_hh_;
};

// torch.nn.RNNCell (nonlinearity "tanh" or "relu").
class RNNCell : public RNNCellBase {
 public:
  // See RNNCellBase::RNNCellBase.
  RNNCell(int64_t input_size, int64_t hidden_size, Generator& gen, bool bias = true,
          const std::string& nonlinearity = "tanh");
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh")
      : RNNCell(input_size, hidden_size, default_generator(), bias, nonlinearity) {}  // from default_generator()
  Tensor forward(const Tensor& x, const Tensor& h);  // h' (B,H)
  using RNNCellBase::forward;
};

// torch.nn.LSTMCell.
class LSTMCell : public RNNCellBase {
 public:
  // See RNNCellBase::RNNCellBase.
  LSTMCell(int64_t input_size, int64_t hidden_size, Generator& gen, bool bias = true);
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true)  // from default_generator()
      : LSTMCell(input_size, hidden_size, default_generator(), bias) {}
  // (h', c') from x (B,C), h and c (B,H).
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& h, const Tensor& c);
  using RNNCellBase::forward;
};

// torch.nn.GRUCell.
class GRUCell : public RNNCellBase {
 public:
  // See RNNCellBase::RNNCellBase.
  GRUCell(int64_t input_size, int64_t hidden_size, Generator& gen, bool bias = true);
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true)  // from default_generator()
      : GRUCell(input_size, hidden_size, default_generator(), bias) {}
  Tensor forward(const Tensor& x, const Tensor& h);  // h' (B,H)
  using RNNCellBase::forward;
};

}  // namespace xg::nn
