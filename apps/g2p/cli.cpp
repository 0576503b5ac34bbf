#include "apps/g2p/cli.h"

#include "autograd/autograd.h"
#include "apps/common/cli.h"

namespace xg::g2p {

using namespace train;
using namespace cli;

G2PCommand::G2PCommand() : train(default_recipe()) {
  loop.eval_every = 2000;
  loop.log_every = 200;
}

Parsed parse_g2p_command(int argc, const char* const* argv, G2PCommand& cmd) {
  using L = OptionLimits;
  G2POptions& o = cmd.job;
  TrainWords words;
  int64_t pronounce_threads = 1;
  std::string batches = o.length_batches ? "length" : "random", stress = o.keep_stress ? "keep" : "drop";
  CLI::App *train = nullptr, *attention = nullptr;
  auto setup = [&](CLI::App& app) {
    app.description(
        "Grapheme-to-phoneme on CMUdict 0.4 (apt-get install festlex-cmu) with the encoder-decoder Transformer: "
        "`train` holds out 10% of the words (by a hash of the word) and reports word and phoneme error rates; "
        "`pronounce` prints the phones of words, one line per word; `attention` writes the cross-attention maps of one "
        "word.");
    app.require_subcommand(1);
    train = app.add_subcommand(
        "train",
        "train the model; the last line is: final steps=N wer=... per=... [wer_stress=... per_stress=..., with "
        "--stress keep] train_seconds=... train_wer=... train_per=... (the last two: greedy, on 1,000 training words)");
    CLI::App& t = *train;
    add_path(t, "--dict", o.dict, "the dictionary in Festival's format")->default_str(o.dict);
    add_seq2seq_model_options(t, o.model_kind, o.model, o.rnn);
    add_int(t, "--batch", o.batch_size, 1, L::batch, "(word, pronunciation) pairs a step");
    add_word(t, "--batches", batches, {"length", "random"},
             "length: each batch holds words of one spelling length (less padding), each pair still drawn with "
             "probability 1/pairs; random: pairs drawn uniformly");
    add_word(t, "--stress", stress, {"drop", "keep"},
             "drop: learn and output phones without stress digits (er), scored without stress; keep: with them "
             "(er1), scored with and without");
    add_train_options(t, cmd.train, words,
                      "seconds of training: the schedule runs over whichever ends first, --steps or this (a step's "
                      "place in it is the larger of its number and steps x seconds / limit), so a run the clock ends "
                      "still ends its cosine; 0: --steps only. The default keeps a whole run under an hour");
    add_smoothing(t, o.label_smoothing);
    add_int(t, "--eval-words", o.eval_words, 0, 1 << 20, "held-out words per evaluation (0: all)");
    add_int(t, "--beam", o.beam, 1, L::beam, "beam of the final evaluation, over every held-out word");
    add_int(t, "--max-words", o.max_words, 0, 1 << 20, "train on the first N training words only (0: all)");
    add_threads(t, cmd.threads);
    add_loop_options(t, cmd.loop, "continue from --checkpoint when that file exists (same options, else an error)");

    CLI::App& p = *app.add_subcommand("pronounce", "print the phones of each word, one line per word");
    add_path(p, "--checkpoint", cmd.checkpoint, "checkpoint written by g2p train")->required();
    add_int(p, "--beam", cmd.beam, 1, L::beam, "beam size (1: greedy)");
    add_int(p, "--threads", pronounce_threads, 1, available_cores(), "threads of xgrad's pool")->default_str("1");
    p.add_option("words", cmd.words, "words (default: one a line from stdin)")->type_name("WORD");

    attention = app.add_subcommand("attention",
                                   "write the cross-attention weights of one word, one file per decoder layer and head "
                                   "(DIR/layer<L>_head<H>.txt, for gnuplot; scripts/pictures.sh draws them)");
    CLI::App& a = *attention;
    add_path(a, "--checkpoint", cmd.checkpoint, "checkpoint written by g2p train")->required();
    a.add_option("--input", cmd.input, "the word")->required()->type_name("WORD");
    add_path(a, "--out", cmd.out_dir, "directory for the files (must exist)", "DIR")->required();
  };
  auto check = [&] {
    cmd.mode = train->parsed() ? "train" : attention->parsed() ? "attention" : "pronounce";
    if (cmd.mode != "train") {
      cmd.threads = pronounce_threads;
      return;
    }
    o.length_batches = batches == "length";
    o.keep_stress = stress == "keep";
    o.seed = cmd.train.seed;
    check_loop_options(cmd.loop);
    check_heads(o.model);
    take_shared_rnn_options(o.model, o.rnn);
    check_train_options(cmd.train, words);
    o.validate();
  };
  return parse_with("g2p", argc, argv, setup, check);
}

}  // namespace xg::g2p
