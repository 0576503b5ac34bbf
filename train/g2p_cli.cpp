// The command line of examples/g2p (train and pronounce).
#include <limits>

#include "autograd/autograd.h"
#include "train/cli.h"
#include "train/detail/cli_options.h"

namespace xg::train {

using namespace cli_detail;

Parsed parse_g2p_command(int argc, const char* const* argv, G2PCommand& cmd) {
  using L = OptionLimits;
  G2POptions& o = cmd.train;
  int64_t threads = cmd.threads, pronounce_threads = 1;
  std::string precision = precision_name(o.precision), batches = o.length_batches ? "length" : "random",
              stress = o.keep_stress ? "keep" : "drop";
  CLI::App* train = nullptr;
  auto setup = [&](CLI::App& app) {
    app.description(
        "Grapheme-to-phoneme on CMUdict 0.4 (apt-get install festlex-cmu) with the encoder-decoder Transformer: "
        "`train` holds out 10% of the words (by a hash of the word) and reports word and phoneme error rates; "
        "`pronounce` prints the phones of words, one line per word.");
    app.require_subcommand(1);
    train = app.add_subcommand(
        "train",
        "train the model; the last line is: final steps=N wer=... per=... [wer_stress=... per_stress=..., with "
        "--stress keep] train_seconds=... train_wer=... train_per=... (the last two: greedy, on 1,000 training words)");
    CLI::App& t = *train;
    t.add_option("--dict", o.dict, "the dictionary in Festival's format")->type_name("PATH")->default_str(o.dict);
    add_model_options(t, o.model, "encoder and decoder layers (N)");
    add_int(t, "--batch", o.batch_size, 1, L::batch, "(word, pronunciation) pairs a step");
    add_word(t, "--batches", batches, {"length", "random"},
             "length: each batch holds words of one spelling length (less padding), each pair still drawn with "
             "probability 1/pairs; random: pairs drawn uniformly");
    add_word(t, "--stress", stress, {"drop", "keep"},
             "drop: learn and output phones without stress digits (er), scored without stress; keep: with them "
             "(er1), scored with and without");
    add_int(t, "--steps", o.steps, 1, L::steps, "steps of the schedule, and the most steps run");
    add_real(t, "--time-limit", o.time_limit, 0, 1e9,
             "seconds of training: the schedule runs over whichever ends first, --steps or this (a step's place in "
             "it is the larger of its number and steps x seconds / limit), so a run the clock ends still ends its "
             "cosine; 0: --steps only. The default keeps a whole run under an hour");
    add_real(t, "--lr", o.lr, 1e-9, 10, "peak learning rate (warm-up, then a cosine down to --lr / 10 at the end of the schedule)");
    add_int(t, "--warmup", o.warmup, 0, L::steps, "warm-up steps of the schedule, counted as --time-limit places them (below --steps)");
    add_real(t, "--average", o.average, 0, 0.99,
             "score and save the mean of the weights at 8 points over this last fraction of the schedule "
             "(checkpoint averaging; 0: the final weights)");
    add_real(t, "--smoothing", o.label_smoothing, 0, 0.999, "label smoothing");
    add_real(t, "--clip", o.clip_norm, 0, 1e6, "gradient norm clip (0: off)");
    add_int(t, "--seed", o.seed, 0, std::numeric_limits<int64_t>::max() / 2, "initialisation, dropout, batches");
    add_int(t, "--eval-every", o.eval_every, 1, L::steps, "steps between evaluations (greedy)");
    add_int(t, "--eval-words", o.eval_words, 0, 1 << 20, "held-out words per evaluation (0: all)");
    add_int(t, "--beam", o.beam, 1, L::beam, "beam of the final evaluation, over every held-out word");
    add_int(t, "--max-words", o.max_words, 0, 1 << 20, "train on the first N training words only (0: all)");
    add_int(t, "--threads", threads, 1, available_cores(), "threads of xgrad's pool (default: every core)")
        ->default_str("all cores");
    add_precision(t, precision)->default_str("bf16 where the CPU has AVX512_BF16, else f32");
    add_int(t, "--log-every", cmd.loop.log_every, 1, L::steps, "steps between progress lines when not on a terminal");
    add_checkpoint_options(t, o.checkpoint, o.checkpoint_every, o.resume, cmd.loop.metrics,
                           "continue from --checkpoint when that file exists (same options, else an error)");

    CLI::App& p = *app.add_subcommand("pronounce", "print the phones of each word, one line per word");
    p.add_option("--checkpoint", cmd.checkpoint, "checkpoint written by g2p train")->required()->type_name("PATH");
    add_int(p, "--beam", cmd.beam, 1, L::beam, "beam size (1: greedy)");
    add_int(p, "--threads", pronounce_threads, 1, available_cores(), "threads of xgrad's pool")->default_str("1");
    p.add_option("words", cmd.words, "words (default: one a line from stdin)")->type_name("WORD");
  };
  auto check = [&] {
    cmd.mode = train->parsed() ? "train" : "pronounce";
    cmd.threads = static_cast<int>(cmd.mode == "train" ? threads : pronounce_threads);
    o.precision = parse_precision(precision);
    o.length_batches = batches == "length";
    o.keep_stress = stress == "keep";
    check_common(o.resume, o.checkpoint, o.model, o.precision);
    check_warmup(o.warmup, o.steps);
    o.validate();
  };
  return parse_with("g2p", argc, argv, setup, check);
}

}  // namespace xg::train
