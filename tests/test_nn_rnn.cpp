// nn/rnn.h
#include <doctest/doctest.h>

#include "test_nn_helpers.h"

using namespace xg;

namespace {

// (B,T,C) inputs, as these tests write them.
nn::RNNOptions opts(int64_t in, int64_t hidden, int64_t layers = 1, bool bidirectional = false) {
  return nn::RNNOptions(in, hidden).num_layers(layers).batch_first(true).bidirectional(bidirectional);
}

std::unique_ptr<nn::RNNBase> make(nn::RNNMode mode, const nn::RNNOptions& o, Generator& g) {
  switch (mode) {
    case nn::RNNMode::tanh: return std::make_unique<nn::RNN>(o, g);
    case nn::RNNMode::relu: return std::make_unique<nn::RNN>(nn::RNNOptions(o).nonlinearity("relu"), g);
    case nn::RNNMode::lstm: return std::make_unique<nn::LSTM>(o, g);
    case nn::RNNMode::gru: return std::make_unique<nn::GRU>(o, g);
  }
  return nullptr;
}

const nn::RNNMode kModes[] = {nn::RNNMode::tanh, nn::RNNMode::relu, nn::RNNMode::lstm, nn::RNNMode::gru};

}  // namespace

TEST_CASE("nn RNN/LSTM/GRU: PyTorch's parameter names and shapes, gates stacked i,f,g,o / r,z,n") {
  Generator g(1);
  nn::LSTM lstm(opts(5, 3, 2, true), g);
  const auto sd = lstm.state_dict();
  CHECK(sd.size() == 16);
  CHECK(sd.at("weight_ih_l0").shape() == Shape{12, 5});
  CHECK(sd.at("weight_hh_l0").shape() == Shape{12, 3});
  CHECK(sd.at("bias_ih_l0_reverse").shape() == Shape{12});
  CHECK(sd.at("weight_ih_l1").shape() == Shape{12, 6});  // the layer below's two directions
  CHECK(sd.at("bias_hh_l1_reverse").shape() == Shape{12});
  nn::GRU gru(opts(5, 3), g);
  CHECK(gru.state_dict().at("weight_hh_l0").shape() == Shape{9, 3});
  CHECK(nn::RNN(opts(5, 3).bias(false), g).state_dict().size() == 2);
  CHECK(lstm.type_name() == "LSTM(input_size=5, hidden_size=3, num_layers=2, batch_first, bidirectional)");
  const double bound = 1 / std::sqrt(3.0);
  for (auto& [name, p] : lstm.named_parameters())
    for (double v : p.to_vector()) CHECK(std::abs(v) <= bound);
  const nn::RNNOutput r = lstm.forward(zeros({4, 7, 5}), Tensor());
  CHECK(r.output.shape() == Shape{4, 7, 6});
  CHECK(r.h_n.shape() == Shape{4, 4, 3});
  CHECK(r.c_n.shape() == Shape{4, 4, 3});
  CHECK_FALSE(gru.forward(zeros({4, 7, 5}), Tensor()).c_n.defined());
}

TEST_CASE("nn RNN/LSTM/GRU: gradcheck in float64 of outputs and final states, with h0, c0 and lengths") {
  for (nn::RNNMode mode : kModes)
    for (bool bidirectional : {false, true}) {
      CAPTURE(static_cast<int>(mode));
      CAPTURE(bidirectional);
      Generator g(3);
      auto rnn = make(mode, opts(3, 4, 2, bidirectional), g);
      rnn->to(f64);
      const int64_t D = bidirectional ? 2 : 1;
      Tensor x = xgnt::input({3, 5, 3}, 4).requires_grad_();
      Tensor h0 = (xgnt::input({2 * D, 3, 4}, 5) * 0.5).requires_grad_();
      Tensor c0 = (xgnt::input({2 * D, 3, 4}, 6) * 0.5).requires_grad_();
      const bool lstm = mode == nn::RNNMode::lstm;
      std::vector<Tensor> extra{x, h0};
      if (lstm) extra.push_back(c0);
      xgnt::check_grad(
          [&] {
            const nn::RNNOutput r = rnn->forward(x, h0, {5, 2, 4}, lstm ? c0 : Tensor());
            Tensor all = concat({reshape(r.output, {-1}), reshape(r.h_n, {-1})}, 0);
            return lstm ? concat({all, reshape(r.c_n, {-1})}, 0) : all;
          },
          rnn->parameters(), extra);
    }
}

TEST_CASE("nn RNN/LSTM/GRU cells: gradcheck in float64") {
  Generator g(5);
  nn::RNNCell rnn(3, 4, g), relu(3, 4, g, true, "relu");
  nn::LSTMCell lstm(3, 4, g);
  nn::GRUCell gru(3, 4, g);
  for (nn::Module* m : std::vector<nn::Module*>{&rnn, &relu, &lstm, &gru}) m->to(f64);
  Tensor x = xgnt::input({2, 3}, 1).requires_grad_();
  Tensor h = xgnt::input({2, 4}, 2).requires_grad_();
  Tensor c = xgnt::input({2, 4}, 3).requires_grad_();
  xgnt::check_grad([&] { return rnn.forward(x, h); }, rnn.parameters(), {x, h});
  xgnt::check_grad([&] { return relu.forward(x, h); }, relu.parameters(), {x, h});
  xgnt::check_grad([&] { return gru.forward(x, h); }, gru.parameters(), {x, h});
  xgnt::check_grad(
      [&] {
        auto [h2, c2] = lstm.forward(x, h, c);
        return concat({h2, c2}, 1);
      },
      lstm.parameters(), {x, h, c});
}

TEST_CASE("nn RNN/LSTM/GRU: a padded batch with lengths equals each row run alone") {
  for (nn::RNNMode mode : kModes) {
    CAPTURE(static_cast<int>(mode));
    Generator g(7);
    auto rnn = make(mode, opts(3, 4, 2, true), g);
    rnn->to(f64);
    const std::vector<int64_t> lengths{6, 2, 4};
    Tensor x = xgnt::input({3, 6, 3}, 8);
    const nn::RNNOutput all = rnn->forward(x, Tensor(), lengths);
    for (int64_t b = 0; b < 3; ++b) {
      CAPTURE(b);
      const int64_t n = lengths[static_cast<size_t>(b)];
      const nn::RNNOutput one = rnn->forward(slice(slice(x, 0, b, b + 1), 1, 0, n), Tensor());
      const Tensor row = slice(all.output, 0, b, b + 1);
      CHECK(max(abs(sub(slice(row, 1, 0, n), one.output))).item() < 1e-14);
      if (n < 6) CHECK(max(abs(slice(row, 1, n, 6))).item() == 0.0);  // zero past the row's end
      CHECK(max(abs(sub(slice(all.h_n, 1, b, b + 1), one.h_n))).item() < 1e-14);
      if (mode == nn::RNNMode::lstm) CHECK(max(abs(sub(slice(all.c_n, 1, b, b + 1), one.c_n))).item() < 1e-14);
    }
  }
}

TEST_CASE("nn RNN/LSTM/GRU: every parameter gets a gradient") {
  Generator g(9);
  nn::GRU gru(opts(3, 4, 2, true), g);
  xgnt::check_all_params_get_grad(gru, gru.forward(xgnt::input({2, 5, 3}, 1, f32)));  // the output alone
}

TEST_CASE("nn RNN/LSTM/GRU: bad arguments name the argument and the accepted range") {
  Generator g(1);
  CHECK(XGN_THROW_MESSAGE(nn::LSTM(opts(3, 0), g), std::invalid_argument) == "LSTM: hidden_size 0: expected 1..16777216");
  CHECK(XGN_THROW_MESSAGE(nn::RNN(opts(3, 4).nonlinearity("sigmoid"), g), std::invalid_argument) ==
        "RNN: nonlinearity 'sigmoid': expected tanh or relu");
  CHECK(XGN_THROW_MESSAGE(nn::LSTM(opts(3, 4).nonlinearity("relu"), g), std::invalid_argument) ==
        "LSTM: nonlinearity 'relu' is RNN's option; LSTM and GRU have their own gates");
  nn::GRU gru(opts(3, 4), g);
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(gru.forward(zeros({2, 5, 3}), Tensor(), {5, 0}), std::invalid_argument),
                       "lengths[1] = 0: expected 1..5"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(gru.forward(zeros({2, 5, 3}), Tensor(), {6, 1}), std::invalid_argument),
                       "lengths[0] = 6: expected 1..5"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(gru.forward(zeros({2, 5, 3}), Tensor(), {5}), std::invalid_argument),
                       "1 lengths for a batch of 2 rows"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(gru.forward(zeros({2, 5, 3}), zeros({1, 3, 4})), ShapeError),
                       "h0 of shape (1,3,4) and dtype float32: expected (1,2,4) (L*D,B,H)"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(gru.forward(zeros({2, 5, 4}), Tensor()), ShapeError),
                       "input of shape (2,5,4): expected (B,T,3) or unbatched (T,3)"));
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(gru.forward(zeros({2, 5, 3}), Tensor(), {}, zeros({1, 2, 4})),
                                         std::invalid_argument),
                       "c0 is the LSTM's cell state"));
  nn::LSTMCell cell(3, 4, g);
  CHECK(xgnt::contains(XGN_THROW_MESSAGE(cell.forward(zeros({2, 3}), zeros({2, 5}), Tensor()), ShapeError),
                       "h of shape (2,5)"));
}

TEST_CASE("nn rnn_step: an input product that is not (B,G*H) is named with its shape") {
  Tensor w = zeros({8, 2}, f64), c = zeros({3, 2}, f64), h = zeros({3, 2}, f64);
  CHECK(XG_THROW_MESSAGE(nn::rnn_step(nn::RNNMode::lstm, zeros({3, 1, 8}, f64), h, c, w, Tensor()), ShapeError) ==
        "rnn_step: x_proj of shape (3,1,8): expected (B,G*H)");
  Tensor undefined;
  CHECK(XG_THROW_MESSAGE(nn::rnn_step(nn::RNNMode::lstm, undefined, h, c, w, Tensor()), ShapeError) ==
        "rnn_step: x_proj of shape undefined: expected (B,G*H)");
}

TEST_CASE("nn LSTM and GRU: (T,B,C) by default as PyTorch's, (B,T,C) with batch_first, (T,C) unbatched: one result") {
  for (nn::RNNMode mode : {nn::RNNMode::lstm, nn::RNNMode::gru}) {
    Generator g1(7), g2(7);
    auto first = make(mode, opts(3, 4, 2, true), g1);
    auto second = make(mode, nn::RNNOptions(3, 4).num_layers(2).bidirectional(true), g2);  // batch_first false
    first->to(f64), second->to(f64);
    const Tensor x = xgnt::input({2, 5, 3}, 8);  // (B,T,C)
    const nn::RNNOutput a = first->forward(x, Tensor()), b = second->forward(transpose(x, 0, 1), Tensor());
    CHECK(b.output.shape() == Shape{5, 2, 8});  // (T,B,D*H)
    CHECK(max(abs(transpose(b.output, 0, 1) - a.output)).item() == 0.0);
    CHECK(max(abs(b.h_n - a.h_n)).item() == 0.0);  // states (L*D,B,H) either way
    // unbatched (T,C): the batch of one, its batch axis taken out
    const nn::RNNOutput u = second->forward(slice(transpose(x, 0, 1), 1, 1, 2).reshape({5, 3}), Tensor());
    CHECK(u.output.shape() == Shape{5, 8});
    CHECK(u.h_n.shape() == Shape{4, 4});
    // a batch of one row against two: the products may round differently
    CHECK(max(abs(u.output - slice(b.output, 1, 1, 2).reshape({5, 8}))).item() < 1e-14);
  }
}
