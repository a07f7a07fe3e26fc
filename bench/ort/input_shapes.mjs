// node input_shapes.mjs MODEL.onnx INPUT_DIR
// Prints `--input-shape NAME=D0xD1...` for each INPUT_DIR/input_N.pb (N = the model's input order, as
// ONNX Runtime lists it), one a line: `kiln compile` flags that bind symbolic dimensions to the data.
import fs from 'node:fs';
import path from 'node:path';
import ort from 'onnxruntime-node';
import protobuf from 'protobufjs';

const [modelPath, inputDir] = process.argv.slice(2);
const root = await protobuf.load('/usr/include/onnx/onnx.proto');
const TensorProto = root.lookupType('onnx.TensorProto');
const session = await ort.InferenceSession.create(modelPath);
session.inputNames.forEach((name, i) => {
  const file = path.join(inputDir, `input_${i}.pb`);
  if (!fs.existsSync(file)) return;
  const t = TensorProto.decode(fs.readFileSync(file));
  const dims = t.dims.map(Number);
  console.log(`--input-shape\n${name}=${dims.length ? dims.join('x') : ''}`);
});
