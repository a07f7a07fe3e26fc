// node run_case.mjs CASE_DIR [THREADS]
// Runs CASE_DIR/model.onnx in ONNX Runtime on every CASE_DIR/test_data_set_*/input_N.pb and writes
// output_N.pb beside them, so `kiln conformance CASE_DIR` compares kiln with ONNX Runtime.
// TensorProtos are read and written with protobufjs from libonnx-dev's own onnx.proto.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import protobuf from 'protobufjs';

const [caseDir, threadsArg] = process.argv.slice(2);
if (!caseDir) {
  console.error('usage: node run_case.mjs CASE_DIR [THREADS]');
  process.exit(2);
}
const root = await protobuf.load('/usr/include/onnx/onnx.proto');
const TensorProto = root.lookupType('onnx.TensorProto');

// ONNX dtype number -> [ort type name, typed array constructor].
const DTYPES = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array], 4: ['uint16', Uint16Array],
  5: ['int16', Int16Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array], 9: ['bool', Uint8Array],
  10: ['float16', Uint16Array], 11: ['float64', Float64Array], 12: ['uint32', Uint32Array], 13: ['uint64', BigUint64Array],
};
const BY_NAME = Object.fromEntries(Object.entries(DTYPES).map(([k, [n]]) => [n, Number(k)]));

function readTensor(file) {
  const t = TensorProto.decode(fs.readFileSync(file));
  const [type, Ctor] = DTYPES[t.dataType] ?? [];
  if (!type) throw new Error(`${file}: dtype ${t.dataType} is not supported by this script`);
  if (!t.rawData || t.rawData.length === 0 && t.dims.some((d) => Number(d) !== 0) && t.dims.length > 0)
    throw new Error(`${file}: expected raw_data`);
  const raw = Buffer.from(t.rawData);
  const aligned = new Uint8Array(raw.length);
  aligned.set(raw);
  const data = new Ctor(aligned.buffer, 0, raw.length / Ctor.BYTES_PER_ELEMENT);
  const dims = t.dims.map(Number);
  return { name: t.name, tensor: new ort.Tensor(type, type === 'bool' ? Uint8Array.from(data) : data, dims) };
}

function writeTensor(file, name, tensor) {
  const dataType = BY_NAME[tensor.type];
  const bytes = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  const msg = TensorProto.create({ name, dataType, dims: tensor.dims, rawData: bytes });
  fs.writeFileSync(file, TensorProto.encode(msg).finish());
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
    if (fs.existsSync(file)) feeds[name] = readTensor(file).tensor;
  });
  const results = await session.run(feeds);
  session.outputNames.forEach((name, i) => writeTensor(path.join(dir, `output_${i}.pb`), name, results[name]));
}
console.log(`ort: ${sets.length} data set(s) of ${caseDir}`);
