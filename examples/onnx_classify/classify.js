// Classifies Fashion-MNIST test images with ONNX Runtime alone, from what
// xg_export wrote of a vision checkpoint: the graph and manifest.json, which
// says how to prepare an image (layout, scale, mean, deviation) and names
// the classes. Nothing of xgrad runs.
//   vision train --model cnn --steps 300 --checkpoint cnn.safetensors
//   xg_export cnn.safetensors cnn_onnx
//   NODE_PATH=build/onnxruntime/node_modules node examples/onnx_classify/classify.js cnn_onnx \
//       /usr/share/datasets/fashion-mnist 0 20
// prints a line per image, as `vision predict --first 0 --count 20` does:
//   image 0: predicted Ankle boot, true Ankle boot
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const ort = require('onnxruntime-node');

// An IDX file (plain or gzip): its dimensions and its bytes after the header.
function readIdx(file) {
  let data = fs.readFileSync(fs.existsSync(file) ? file : file + '.gz');
  if (data[0] === 0x1f && data[1] === 0x8b) data = zlib.gunzipSync(data);
  if (data[0] !== 0 || data[1] !== 0 || data[2] !== 8) throw new Error(`${file}: not an IDX file of bytes`);
  const rank = data[3];
  const dims = [];
  for (let i = 0; i < rank; ++i) dims.push(data.readUInt32BE(4 + 4 * i));
  return {dims, bytes: data.subarray(4 + 4 * rank)};
}

// `text` as a whole number in [lo, hi], or an error naming it and the range.
function whole(name, text, lo, hi) {
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || n < lo || n > hi) throw new Error(`${name} '${text}': expected a whole number from ${lo} to ${hi}`);
  return n;
}

// Images [first, first + count) as the manifest's preprocessing prepares them.
function prepare(images, first, count, pre, graph) {
  if (pre.layout !== 'NCHW') throw new Error(`preprocessing layout ${pre.layout}: this reader knows NCHW`);
  const [, C, H, W] = graph.inputs[0].axes.map(Number);
  const [, h, w] = images.dims;
  if (C !== 1 || H !== h || W !== w) throw new Error(`the graph takes (N,${C},${H},${W}), the images are ${h}x${w}`);
  const size = h * w;
  const x = new Float32Array(count * size);
  for (let i = 0; i < count * size; ++i) x[i] = (pre.scale * images.bytes[first * size + i] - pre.mean) / pre.std;
  return new ort.Tensor('float32', x, [count, 1, h, w]);
}

async function main() {
  const [dir, data, firstArg, countArg] = process.argv.slice(2);
  if (!dir || !data) {
    console.error('usage: node classify.js OUTDIR DATA_DIR [FIRST] [COUNT]');
    process.exit(2);
  }
  const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
  if (!manifest.preprocessing || !manifest.vocabulary.names)
    throw new Error(`${dir}/manifest.json has no preprocessing or class names (export a newer checkpoint)`);
  const graph = manifest.graphs[0];
  const images = readIdx(path.join(data, 't10k-images-idx3-ubyte'));
  const labels = readIdx(path.join(data, 't10k-labels-idx1-ubyte'));
  const total = images.dims[0];
  const first = whole('FIRST', firstArg || '0', 0, total - 1);
  const count = Math.min(whole('COUNT', countArg || '10', 1, total), total - first);
  const session = await ort.InferenceSession.create(path.join(dir, graph.file), {intraOpNumThreads: 1});
  const out = await session.run({[graph.inputs[0].name]: prepare(images, first, count, manifest.preprocessing, graph)});
  const logits = out[graph.outputs[0].name].data, classes = manifest.vocabulary.classes;
  const names = manifest.vocabulary.names;
  for (let k = 0; k < count; ++k) {
    let best = 0;  // the first of equal logits, as xgrad's argmax
    for (let j = 1; j < classes; ++j) if (logits[k * classes + j] > logits[k * classes + best]) best = j;
    const truth = labels.bytes[first + k];
    console.log(`image ${first + k}: predicted ${names[best]}, true ${names[truth]}${best === truth ? '' : ' (wrong)'}`);
  }
}

main().catch(e => {
  console.error('classify: ' + e.message);
  process.exit(1);
});
