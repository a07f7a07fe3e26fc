// TensorProto files (the ONNX test-case layout's input_N.pb / output_N.pb) for the ONNX Runtime
// scripts, read and written with protobufjs from libonnx-dev's own onnx.proto.
import fs from 'node:fs';
import protobuf from 'protobufjs';

const root = await protobuf.load('/usr/include/onnx/onnx.proto');
const TensorProto = root.lookupType('onnx.TensorProto');

// ONNX dtype number -> [ort type name, typed array constructor].
export const DTYPES = {
  1: ['float32', Float32Array], 2: ['uint8', Uint8Array], 3: ['int8', Int8Array], 4: ['uint16', Uint16Array],
  5: ['int16', Int16Array], 6: ['int32', Int32Array], 7: ['int64', BigInt64Array], 9: ['bool', Uint8Array],
  10: ['float16', Uint16Array], 11: ['float64', Float64Array], 12: ['uint32', Uint32Array], 13: ['uint64', BigUint64Array],
};
export const BY_NAME = Object.fromEntries(Object.entries(DTYPES).map(([k, [n]]) => [n, Number(k)]));

// { name, type (ort name), data (typed array), dims } from raw_data or the typed fields.
export function readTensor(file) {
  const t = TensorProto.decode(fs.readFileSync(file));
  const [type, Ctor] = DTYPES[t.dataType] ?? [];
  if (!type) throw new Error(`${file}: dtype ${t.dataType} is not supported by this script`);
  const dims = t.dims.map(Number);
  let data;
  if (t.rawData && t.rawData.length > 0) {
    const aligned = new Uint8Array(t.rawData.length);
    aligned.set(t.rawData);
    data = new Ctor(aligned.buffer, 0, t.rawData.length / Ctor.BYTES_PER_ELEMENT);
  } else {
    const src = t.floatData?.length ? t.floatData : t.doubleData?.length ? t.doubleData
      : t.int64Data?.length ? t.int64Data : t.int32Data ?? [];
    data = Ctor === BigInt64Array || Ctor === BigUint64Array
      ? Ctor.from(src, (v) => BigInt(v.toString())) : Ctor.from(src, Number);
  }
  return { name: t.name, type, data, dims };
}

// Writes a typed array of ort dtype `type` as a raw_data TensorProto.
export function writeTensor(file, name, type, data, dims) {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const msg = TensorProto.create({ name, dataType: BY_NAME[type], dims, rawData: bytes });
  fs.writeFileSync(file, TensorProto.encode(msg).finish());
}
