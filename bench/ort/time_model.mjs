// node time_model.mjs MODEL.onnx INPUT_DIR THREADS REPEAT [--warmup W] [--check OUT_DIR] [--rtol R] [--atol A]
//                      [--make-inputs SEED]
// Times MODEL.onnx in ONNX Runtime (CPU, intraOpNumThreads = THREADS, sequential) on the tensors
// INPUT_DIR/input_N.pb (N = the model's input order): W untimed warm-up runs, then REPEAT timed
// session.run calls; prints `median: X ms over REPEAT run(s)` (the same median as kiln's runner:
// the sorted times' element REPEAT/2). Each timed call includes onnxruntime-node's JS binding
// (tensor wrapping, output allocation), tens of microseconds that kiln's runner does not pay.
// With --check, compares ORT's outputs with OUT_DIR/output_N.pb (kiln's) element-wise,
// |kiln - ort| <= atol + rtol * |ort|, prints `check: ok ...` or `check: MISMATCH ...`, and exits 1
// on a mismatch. With --make-inputs, first writes INPUT_DIR/input_N.pb from a seed (floats uniform in
// [-1, 1), integers in [0, 10), as kiln's seeded inputs; symbolic dimensions are 1) for models without
// a test data set. Values are read and written as TensorProtos by tensor_io.mjs.
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import ort from 'onnxruntime-node';
import { DTYPES, readTensor, writeTensor } from './tensor_io.mjs';

const args = process.argv.slice(2);
const opts = { warmup: 3, check: null, rtol: 1e-3, atol: 1e-4, makeInputs: null };
const pos = [];
for (let i = 0; i < args.length; ++i) {
  const a = args[i];
  if (a === '--warmup') opts.warmup = Number(args[++i]);
  else if (a === '--check') opts.check = args[++i];
  else if (a === '--rtol') opts.rtol = Number(args[++i]);
  else if (a === '--atol') opts.atol = Number(args[++i]);
  else if (a === '--make-inputs') opts.makeInputs = Number(args[++i]);
  else pos.push(a);
}
if (pos.length !== 4) {
  console.error('usage: node time_model.mjs MODEL.onnx INPUT_DIR THREADS REPEAT [--warmup W] [--check OUT_DIR] [--rtol R] [--atol A]');
  process.exit(2);
}
const [modelPath, inputDir] = pos;
const threads = Number(pos[2]);
const repeat = Math.max(1, Number(pos[3]));

const session = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all',
});
if (opts.makeInputs !== null) {
  // xorshift64*, seeded per input: reproducible, not the same stream as kiln's mt19937_64.
  fs.mkdirSync(inputDir, { recursive: true });
  session.inputMetadata.forEach((meta, i) => {
    if (!meta.isTensor) throw new Error(`input '${meta.name}' is not a tensor`);
    const entry = Object.entries(DTYPES).find(([, [n]]) => n === meta.type);
    if (!entry) throw new Error(`input '${meta.name}': dtype ${meta.type} is not supported`);
    const Ctor = entry[1][1];
    const dims = meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1));
    const n = dims.reduce((a, b) => a * b, 1);
    let x = BigInt(opts.makeInputs) * 1000003n + BigInt(i) + 1n;
    const next = () => {
      x ^= x >> 12n; x ^= (x << 25n) & 0xffffffffffffffffn; x ^= x >> 27n;
      return ((x * 0x2545f4914f6cdd1dn) & 0xffffffffffffffffn) >> 11n;
    };
    const data = new Ctor(n);
    for (let j = 0; j < n; ++j) {
      const u = Number(next()) * 2 ** -53;
      if (meta.type === 'float32' || meta.type === 'float64') data[j] = -1 + 2 * u;
      else if (meta.type === 'float16') throw new Error(`input '${meta.name}': float16 inputs are not generated`);
      else if (meta.type === 'bool') data[j] = u < 0.5 ? 0 : 1;
      else data[j] = Ctor === BigInt64Array || Ctor === BigUint64Array ? BigInt(Math.floor(u * 10)) : Math.floor(u * 10);
    }
    writeTensor(path.join(inputDir, `input_${i}.pb`), meta.name, meta.type, data, dims);
  });
}
const feeds = {};
session.inputNames.forEach((name, i) => {
  const file = path.join(inputDir, `input_${i}.pb`);
  if (!fs.existsSync(file)) throw new Error(`${file}: missing (input '${name}')`);
  const t = readTensor(file);
  feeds[name] = new ort.Tensor(t.type, t.type === 'bool' ? Uint8Array.from(t.data) : t.data, t.dims);
});

let results;
for (let w = 0; w < opts.warmup; ++w) results = await session.run(feeds);
const times = [];
for (let r = 0; r < repeat; ++r) {
  const t0 = performance.now();
  results = await session.run(feeds);
  times.push(performance.now() - t0);
}
times.sort((a, b) => a - b);
console.log(`median: ${times[Math.floor(repeat / 2)].toFixed(6)} ms over ${repeat} run(s), min ${times[0].toFixed(6)} ms`);

if (opts.check) {
  let bad = 0, total = 0, maxAbs = 0, worst = '';
  session.outputNames.forEach((name, i) => {
    const file = path.join(opts.check, `output_${i}.pb`);
    const ref = results[name];
    if (!fs.existsSync(file)) { bad++; worst = `${file} missing`; return; }
    const k = readTensor(file);
    const refDims = ref.dims.map(Number);
    if (k.dims.join('x') !== refDims.join('x')) {
      bad++; worst = `${name}: shape ${k.dims.join('x')} vs ORT ${refDims.join('x')}`; return;
    }
    for (let j = 0; j < ref.data.length; ++j) {
      const o = Number(ref.data[j]), v = Number(k.data[j]);
      const d = Math.abs(v - o);
      total++;
      if (!(d <= opts.atol + opts.rtol * Math.abs(o)) && !(Number.isNaN(o) && Number.isNaN(v))) {
        if (bad++ === 0) worst = `${name}[${j}]: kiln ${v} vs ORT ${o}`;
      }
      if (d > maxAbs) maxAbs = d;
    }
  });
  const summary = `max|diff| ${maxAbs.toExponential(2)} over ${total} values (rtol ${opts.rtol}, atol ${opts.atol})`;
  if (bad) {
    console.log(`check: MISMATCH ${bad} value(s); first ${worst}; ${summary}`);
    process.exit(1);
  }
  console.log(`check: ok ${summary}`);
}
