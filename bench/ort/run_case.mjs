// node run_case.mjs CASE_DIR [THREADS]
// Runs CASE_DIR/model.onnx in ONNX Runtime on every CASE_DIR/test_data_set_*/input_N.pb and writes
// output_N.pb beside them, so `kiln conformance CASE_DIR` compares kiln with ONNX Runtime.
// TensorProtos are read and written by tensor_io.mjs.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import { readTensor, writeTensor } from './tensor_io.mjs';

const [caseDir, threadsArg] = process.argv.slice(2);
if (!caseDir) {
  console.error('usage: node run_case.mjs CASE_DIR [THREADS]');
  process.exit(2);
}
const threads = Number(threadsArg ?? 1);
const session = await ort.InferenceSession.create(path.join(caseDir, 'model.onnx'), {
  intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential',
});
const sets = fs.readdirSync(caseDir).filter((d) => d.startsWith('test_data_set_')).sort();
for (const set of sets) {
  const dir = path.join(caseDir, set);
  const feeds = {};
  session.inputNames.forEach((name, i) => {
    const file = path.join(dir, `input_${i}.pb`);
    if (!fs.existsSync(file)) return;
    const t = readTensor(file);
    feeds[name] = new ort.Tensor(t.type, t.type === 'bool' ? Uint8Array.from(t.data) : t.data, t.dims);
  });
  const results = await session.run(feeds);
  session.outputNames.forEach((name, i) => {
    const r = results[name];
    writeTensor(path.join(dir, `output_${i}.pb`), name, r.type, r.data, r.dims);
  });
}
console.log(`ort: ${sets.length} data set(s) of ${caseDir}`);
