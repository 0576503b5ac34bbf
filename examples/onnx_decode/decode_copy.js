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
  // As the applications allow: twice the longest source plus 5, below the positions.
  const limit = Math.min(2 * Math.max(...sources.map(s => s.length)) + 5, Number(decoder.manifest.config.max_len) - 1);
  const outputs = await decoder.greedy(sources, limit);
  sources.forEach((s, i) => console.log(`${s.join(' ')} -> ${outputs[i].join(' ')}`));
}

main().catch(e => {
  console.error('decode_copy: ' + e.message);
  process.exit(1);
});
