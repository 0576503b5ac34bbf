#include "nn/rnn.h"

#include <cmath>
#include <stdexcept>

#include "autograd/ops.h"
#include "nn/init.h"

namespace xg::nn {

namespace {

int64_t gates_of(RNNMode m) { return m == RNNMode::lstm ? 4 : m == RNNMode::gru ? 3 : 1; }

const char* name_of(RNNMode m) { return m == RNNMode::lstm ? "LSTM" : m == RNNMode::gru ? "GRU" : "RNN"; }

RNNMode parse_nonlinearity(const std::string& s, const char* who) {
  if (s == "tanh") return RNNMode::tanh;
  if (s == "relu") return RNNMode::relu;
  throw std::invalid_argument(std::string(who) + ": nonlinearity '" + s + "': expected tanh or relu");
}

void check_size(const char* who, const char* name, int64_t v) {
  if (v < 1 || v > (int64_t{1} << 24))
    throw std::invalid_argument(std::string(who) + ": " + name + " " + std::to_string(v) + ": expected 1.." +
                                std::to_string(int64_t{1} << 24));
}

// A parameter of shape `s` drawn from U(-1/sqrt(H), 1/sqrt(H)).
Tensor uniform_parameter(const Shape& s, int64_t hidden, Generator& gen) {
  Tensor t = empty(s);
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  init::uniform_(t, gen, -bound, bound);
  return t;
}

}  // namespace

Tensor rnn_step(RNNMode mode, const Tensor& x_proj, const Tensor& h, Tensor& c, const Tensor& w_hh,
                const Tensor& b_hh) {
  // The fused recurrence over one step: (B,G*H) -> (B,1,G*H) -> (B,1,S*H).
  const bool lstm = mode == RNNMode::lstm;
  if (!x_proj.defined() || x_proj.dim() != 2)
    throw ShapeError(std::string("rnn_step: x_proj of shape ") +
                     (x_proj.defined() ? shape_str(x_proj.shape()) : "undefined") + ": expected (B,G*H)");
  const int64_t B = x_proj.size(0);
  const Tensor states =
      recurrence(mode, reshape(x_proj, {B, 1, x_proj.size(1)}), w_hh, b_hh, h, lstm ? c : Tensor(), {}, false);
  const Tensor s = reshape(states, {B, states.size(2)});
  if (!lstm) return s;
  const int64_t H = w_hh.size(1);
  c = slice(s, 1, H, 2 * H);
  return slice(s, 1, 0, H);
}

RNNBase::RNNBase(RNNMode mode, const RNNOptions& o, Generator& gen, std::shared_ptr<Generator> dropout_gen)
    : mode_(mode), opts_(o), drop_gen_(std::move(dropout_gen)), gates_(gates_of(mode)) {
  const char* who = name_of(mode);
  check_size(who, "input_size", o.input_size());
  check_size(who, "hidden_size", o.hidden_size());
  if (o.num_layers() < 1 || o.num_layers() > 64)
    throw std::invalid_argument(std::string(who) + ": num_layers " + std::to_string(o.num_layers()) +
                                ": expected 1..64");
  if (!(o.dropout() >= 0 && o.dropout() < 1))
    throw std::invalid_argument(std::string(who) + ": dropout " + std::to_string(o.dropout()) +
                                ": expected 0 <= p < 1");
  if (o.dropout() > 0 && o.num_layers() > 1 && !drop_gen_)
    throw std::invalid_argument(std::string(who) + ": dropout between layers needs a dropout generator");
  if (mode != RNNMode::tanh && mode != RNNMode::relu && o.nonlinearity() != "tanh")
    throw std::invalid_argument(std::string(who) + ": nonlinearity '" + o.nonlinearity() +
                                "' is RNN's option; LSTM and GRU have their own gates");
  const int64_t H = o.hidden_size(), D = o.bidirectional() ? 2 : 1;
  for (int64_t k = 0; k < o.num_layers(); ++k)
    for (int64_t d = 0; d < D; ++d) {
      const std::string suffix = "_l" + std::to_string(k) + (d == 1 ? "_reverse" : "");
      const int64_t in = k == 0 ? o.input_size() : H * D;
      std::vector<Tensor> w;
      w.push_back(register_parameter("weight_ih" + suffix, uniform_parameter({gates_ * H, in}, H, gen)));
      w.push_back(register_parameter("weight_hh" + suffix, uniform_parameter({gates_ * H, H}, H, gen)));
      if (o.bias()) {
        w.push_back(register_parameter("bias_ih" + suffix, uniform_parameter({gates_ * H}, H, gen)));
        w.push_back(register_parameter("bias_hh" + suffix, uniform_parameter({gates_ * H}, H, gen)));
      } else {
        w.resize(4);
      }
      weights_.push_back(std::move(w));
    }
}

std::string RNNBase::type_name() const {
  std::string s = std::string(name_of(mode_)) + "(input_size=" + std::to_string(opts_.input_size()) +
                  ", hidden_size=" + std::to_string(opts_.hidden_size()) +
                  ", num_layers=" + std::to_string(opts_.num_layers());
  if (mode_ == RNNMode::relu) s += ", nonlinearity=relu";
  if (opts_.batch_first()) s += ", batch_first";
  if (opts_.bidirectional()) s += ", bidirectional";
  return s + ")";
}

namespace {

// The layout the options read: "(T,B,C)" or "(B,T,C)" with C the input size.
std::string layout_of(const RNNOptions& o) {
  return (o.batch_first() ? "(B,T," : "(T,B,") + std::to_string(o.input_size()) + ") or unbatched (T," +
         std::to_string(o.input_size()) + ")";
}

// Checks the arguments of m.forward(x, h0, lengths, c0), x already (B,T,C)
// (the input as given is `given`): not empty, h0 and c0 (L*D,B,H) of x's
// dtype, c0 for the LSTM only, B lengths in 1..T.
void check_input(const RNNBase& m, const Tensor& given, const Tensor& x, const Tensor& h0,
                 const std::vector<int64_t>& lengths, const Tensor& c0) {
  const RNNOptions& o = m.options();
  const int64_t L = o.num_layers(), D = o.bidirectional() ? 2 : 1, H = o.hidden_size();
  if (!x.defined() || x.dim() != 3 || x.size(2) != o.input_size())
    throw ShapeError(m.describe() + ": input of shape " + (given.defined() ? shape_str(given.shape()) : "undefined") +
                     ": expected " + layout_of(o));
  const int64_t B = x.size(0), T = x.size(1);
  if (B < 1 || T < 1) throw ShapeError(m.describe() + ": input of shape " + shape_str(given.shape()) + " is empty");
  const Shape state_shape{L * D, B, H};
  auto check_state = [&](const Tensor& s, const char* name) {
    if (s.defined() && (s.shape() != state_shape || s.dtype() != x.dtype()))
      throw ShapeError(m.describe() + ": " + name + " of shape " + shape_str(s.shape()) + " and dtype " +
                       dtype_name(s.dtype()) + ": expected " + shape_str(state_shape) + " (L*D,B,H) of the input's " +
                       dtype_name(x.dtype()));
  };
  check_state(h0, "h0");
  check_state(c0, "c0");
  if (c0.defined() && m.mode() != RNNMode::lstm)
    throw std::invalid_argument(m.describe() + ": c0 is the LSTM's cell state; this layer has none");
  if (!lengths.empty() && static_cast<int64_t>(lengths.size()) != B)
    throw std::invalid_argument(m.describe() + ": " + std::to_string(lengths.size()) + " lengths for a batch of " +
                                std::to_string(B) + " rows");
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] < 1 || lengths[b] > T)
      throw std::invalid_argument(m.describe() + ": lengths[" + std::to_string(b) + "] = " +
                                  std::to_string(lengths[b]) + ": expected 1.." + std::to_string(T));
}

}  // namespace

RNNOutput RNNBase::forward(const Tensor& given, const Tensor& given_h0, const std::vector<int64_t>& lengths,
                           const Tensor& given_c0, const Tensor& traced_lengths) {
  const auto named = scope();
  // Run on (B,T,C) and states (L*D,B,H); the results go back to the input's layout.
  const bool unbatched = given.defined() && given.dim() == 2;
  const bool swap = !unbatched && !opts_.batch_first() && given.defined() && given.dim() == 3;
  auto batched_state = [&](const Tensor& s) { return unbatched && s.defined() && s.dim() == 2 ? unsqueeze(s, 1) : s; };
  const Tensor x = unbatched ? unsqueeze(given, 0) : swap ? transpose(given, 0, 1) : given;
  const Tensor h0 = batched_state(given_h0), c0 = batched_state(given_c0);
  check_input(*this, given, x, h0, lengths, c0);
  const int64_t L = opts_.num_layers(), D = opts_.bidirectional() ? 2 : 1, H = opts_.hidden_size();
  const int64_t B = x.size(0);

  // A direction's initial state, undefined (zeros) when none is given.
  auto initial = [&](const Tensor& s, int64_t i) {
    return s.defined() ? reshape(slice(s, 0, i, i + 1), {B, H}) : Tensor();
  };

  Tensor input = x;
  std::vector<Tensor> h_last, c_last;
  for (int64_t k = 0; k < L; ++k) {
    std::vector<Tensor> direction_outputs;
    for (int64_t d = 0; d < D; ++d) {
      const std::vector<Tensor>& w = weights_[static_cast<size_t>(k * D + d)];
      const bool lstm = mode_ == RNNMode::lstm;
      // (B,T,H): zero past a row's length (as PyTorch's); its last states at its own length.
      const RecurrentLayerResult r = recurrent_layer(mode_, input, w[0], w[2], w[1], w[3], initial(h0, k * D + d),
                                                     lstm ? initial(c0, k * D + d) : Tensor(), lengths, d == 1,
                                                     traced_lengths);
      h_last.push_back(r.h_n);
      if (lstm) c_last.push_back(r.c_n);
      direction_outputs.push_back(r.output);
    }
    input = D == 1 ? direction_outputs[0] : concat(direction_outputs, 2);  // (B,T,D*H)
    if (k + 1 < L && opts_.dropout() > 0 && is_training()) input = dropout(input, opts_.dropout(), true, *drop_gen_);
  }
  RNNOutput r;
  r.output = unbatched ? squeeze(input, 0) : swap ? transpose(input, 0, 1) : input;
  r.h_n = stack(h_last, 0);
  if (!c_last.empty()) r.c_n = stack(c_last, 0);
  if (unbatched) {
    r.h_n = squeeze(r.h_n, 1);
    if (r.c_n.defined()) r.c_n = squeeze(r.c_n, 1);
  }
  return r;
}

RNN::RNN(const RNNOptions& o, Generator& gen, std::shared_ptr<Generator> dropout_gen)
    : RNNBase(parse_nonlinearity(o.nonlinearity(), "RNN"), o, gen, std::move(dropout_gen)) {}

LSTM::LSTM(const RNNOptions& o, Generator& gen, std::shared_ptr<Generator> dropout_gen)
    : RNNBase(RNNMode::lstm, o, gen, std::move(dropout_gen)) {}

GRU::GRU(const RNNOptions& o, Generator& gen, std::shared_ptr<Generator> dropout_gen)
    : RNNBase(RNNMode::gru, o, gen, std::move(dropout_gen)) {}

RNNCellBase::RNNCellBase(RNNMode mode, int64_t input_size, int64_t hidden_size, Generator& gen, bool bias)
    : mode_(mode), input_size_(input_size), hidden_size_(hidden_size) {
  const std::string who = std::string(name_of(mode)) + "Cell";
  check_size(who.c_str(), "input_size", input_size);
  check_size(who.c_str(), "hidden_size", hidden_size);
  const int64_t G = gates_of(mode), H = hidden_size;
  w_ih_ = register_parameter("weight_ih", uniform_parameter({G * H, input_size}, H, gen));
  w_hh_ = register_parameter("weight_hh", uniform_parameter({G * H, H}, H, gen));
  if (bias) {
    b_ih_ = register_parameter("bias_ih", uniform_parameter({G * H}, H, gen));
    b_hh_ = register_parameter("bias_hh", uniform_parameter({G * H}, H, gen));
  }
}

std::string RNNCellBase::type_name() const {
  return std::string(name_of(mode_)) + "Cell(input_size=" + std::to_string(input_size_) +
         ", hidden_size=" + std::to_string(hidden_size_) + (mode_ == RNNMode::relu ? ", nonlinearity=relu" : "") + ")";
}

Tensor RNNCellBase::step(const Tensor& x, const Tensor& h, Tensor& c) {
  const auto named = scope();
  if (!x.defined() || x.dim() != 2 || x.size(1) != input_size_)
    throw ShapeError(describe() + ": input of shape " + (x.defined() ? shape_str(x.shape()) : "undefined") +
                     ": expected (B," + std::to_string(input_size_) + ")");
  const Shape state{x.size(0), hidden_size_};
  auto check_state = [&](const Tensor& s, const char* name) {
    if (s.defined() && (s.shape() != state || s.dtype() != x.dtype()))
      throw ShapeError(describe() + ": " + name + " of shape " + shape_str(s.shape()) + " and dtype " +
                       dtype_name(s.dtype()) + ": expected " + shape_str(state) + " (B,H) of the input's " +
                       dtype_name(x.dtype()));
  };
  check_state(h, "h");
  check_state(c, "c");
  // One step of the layer's op (exported as ONNX's own cell over one step).
  const RecurrentLayerResult r = recurrent_layer(mode_, reshape(x, {x.size(0), 1, input_size_}), w_ih_, b_ih_, w_hh_,
                                                 b_hh_, h, mode_ == RNNMode::lstm ? c : Tensor(), {}, false);
  if (mode_ == RNNMode::lstm) c = r.c_n;
  return r.h_n;
}

Tensor RNNCellBase::forward(const Tensor& x) {
  Tensor c;
  return step(x, Tensor(), c);
}

RNNCell::RNNCell(int64_t input_size, int64_t hidden_size, Generator& gen, bool bias, const std::string& nonlinearity)
    : RNNCellBase(parse_nonlinearity(nonlinearity, "RNNCell"), input_size, hidden_size, gen, bias) {}

Tensor RNNCell::forward(const Tensor& x, const Tensor& h) {
  Tensor c;
  return step(x, h, c);
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden_size, Generator& gen, bool bias)
    : RNNCellBase(RNNMode::lstm, input_size, hidden_size, gen, bias) {}

std::pair<Tensor, Tensor> LSTMCell::forward(const Tensor& x, const Tensor& h, const Tensor& c) {
  Tensor cell = c;
  Tensor h_new = step(x, h, cell);
  return {h_new, cell};
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden_size, Generator& gen, bool bias)
    : RNNCellBase(RNNMode::gru, input_size, hidden_size, gen, bias) {}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) {
  Tensor c;
  return step(x, h, c);
}

}  // namespace xg::nn
