// node profile_model.mjs MODEL.onnx INPUT_DIR THREADS REPEAT [TOP]
// ONNX Runtime's own per-node profile of MODEL.onnx (CPU, intraOpNumThreads = THREADS, all graph
// optimizations, so nodes are ORT's fused ones): REPEAT profiled runs after 3 warm-ups; prints each
// node's median time over the runs, the TOP largest first, and their sum, to set beside kiln's
// per-loop profile (bench/parallel_profile.sh). Profiling adds a little per node, so compare shares,
// not totals, with an unprofiled timing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { readTensor } from './tensor_io.mjs';

const [modelPath, inputDir, threadsArg, repeatArg, topArg] = process.argv.slice(2);
if (!repeatArg) {
  console.error('usage: node profile_model.mjs MODEL.onnx INPUT_DIR THREADS REPEAT [TOP]');
  process.exit(2);
}
const repeat = Math.max(1, Number(repeatArg));
const top = Number(topArg ?? 25);
const prefix = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'ortprof-')), 'p');
const session = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1, executionMode: 'sequential',
  graphOptimizationLevel: 'all', enableProfiling: false,
});
const feeds = {};
session.inputNames.forEach((name, i) => {
  const t = readTensor(path.join(inputDir, `input_${i}.pb`));
  feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
});
for (let w = 0; w < 3; ++w) await session.run(feeds);
// A second session with profiling on, warmed the same way; its first runs are dropped below.
const profiled = await ort.InferenceSession.create(modelPath, {
  intraOpNumThreads: Number(threadsArg), interOpNumThreads: 1, executionMode: 'sequential',
  graphOptimizationLevel: 'all', enableProfiling: true, profileFilePrefix: prefix,
});
for (let r = 0; r < repeat + 3; ++r) await profiled.run(feeds);
const file = profiled.endProfiling ? profiled.endProfiling() : null;
await profiled.release();
const dir = path.dirname(prefix);
const json = file && fs.existsSync(file) ? file : path.join(dir, fs.readdirSync(dir).find((f) => f.endsWith('.json')));
const events = JSON.parse(fs.readFileSync(json, 'utf8'));
const perNode = new Map();
for (const e of events) {
  if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
  const key = `${e.args?.op_name ?? '?'} ${e.name.slice(0, -'_kernel_time'.length)}`;
  if (!perNode.has(key)) perNode.set(key, []);
  perNode.get(key).push(e.dur);
}
const rows = [];
for (const [key, durs] of perNode) {
  const kept = durs.slice(-repeat).sort((a, b) => a - b);
  rows.push([key, kept[Math.floor(kept.length / 2)]]);
}
rows.sort((a, b) => b[1] - a[1]);
const total = rows.reduce((s, r) => s + r[1], 0);
console.log(`ORT nodes: ${rows.length}; sum of per-node medians ${(total / 1e3).toFixed(3)} ms`);
for (const [key, us] of rows.slice(0, top)) {
  console.log(`${us.toFixed(1).padStart(9)} us ${(100 * us / total).toFixed(1).padStart(5)}%  ${key}`);
}
