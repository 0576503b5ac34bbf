// Decodes the copy task with ONNX Runtime alone, from the graphs that
// xg_export wrote of a train_tasks checkpoint:
//   train_tasks --task copy --steps 300 --checkpoint copy.safetensors
//   xg_export copy.safetensors copy_onnx
//   NODE_PATH=build/onnxruntime/node_modules node examples/onnx_decode/decode_copy.js copy_onnx 3 4 5 6 7
// prints the source and its greedy decode (ids; the task's symbols are
// ids 3..V-1), one line per source given (sources separated by ',').
'use strict';
const {Seq2SeqDecoder} = require('./ort_decoder');

async function main() {
  const [dir, ...words] = process.argv.slice(2);
  if (!dir || !words.length) {
    console.error('usage: node decode_copy.js OUTDIR ID [ID ...] [, ID ...]');
    process.exit(2);
  }
  const sources = words.join(' ').split(',').map(s => s.trim().split(/\s+/).map(Number));
  const decoder = await Seq2SeqDecoder.load(dir);
  // The applications' rule, as the manifest states it: a number of tokens per
  // source token plus a few, never past the model's positions.
  const rule = decoder.manifest.decoding.max_tokens;
  const longest = Math.max(...sources.map(s => s.length));
  const limit = Math.min(rule.per_source_token * longest + rule.extra, rule.at_most);
  const outputs = await decoder.greedy(sources, limit);
  sources.forEach((s, i) => console.log(`${s.join(' ')} -> ${outputs[i].join(' ')}`));
}

main().catch(e => {
  console.error('decode_copy: ' + e.message);
  process.exit(1);
});
