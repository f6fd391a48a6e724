// Scores GGUF files in llama.cpp (node-llama-cpp 3.21.1, as scripts/fetch_data.sh installs it) on
// the windows `ufp4 eval` reads, so that its mean cross-entropy stands next to ufp4's own:
//
//   node scripts/llama_score.mjs SHARD T WINDOWS FILE.gguf...
//
// SHARD is a .tok file (or a folder holding val.tok); window w is tokens [wT, wT + T] (the input
// is the first T, each position predicts the next), as include/ufp4/loader.h lays out validation
// batches, so `ufp4 eval --batches B --batch b` with B b = WINDOWS reads the same tokens. Prints,
// per file: its size in bytes, the mean cross-entropy in nats and the perplexity. One thread, CPU
// only, F32 KV cache, no flash attention (the settings tests/test_gguf_llama.mjs checks against
// ufp4 eval to 1e-5).
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const nlc = path.join(here, "..", process.env.UFP4_DATA_DIR || "data", "raw", "node-llama-cpp");
const [shardArg, tArg, wArg, ...files] = process.argv.slice(2);
if (!shardArg || !tArg || !wArg || !files.length) {
  console.error("usage: node scripts/llama_score.mjs SHARD T WINDOWS FILE.gguf...");
  process.exit(2);
}
const shardPath = fs.statSync(shardArg).isDirectory() ? path.join(shardArg, "val.tok") : shardArg;
const T = Number(tArg), WINDOWS = Number(wArg);
const shard = fs.readFileSync(shardPath);
const width = shard.readUInt32LE(20);
const token = (i) => (width === 2 ? shard.readUInt16LE(64 + 2 * i) : shard.readUInt32LE(64 + 4 * i));
const {getLlama} = await import(pathToFileURL(path.join(nlc, "node_modules/node-llama-cpp/dist/index.js")).href);
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error", maxThreads: 1});

for (const file of files) {
  const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
  // T + 1 cells: with exactly T, node-llama-cpp shifts the context before a full window's end.
  const context = await model.createContext({contextSize: T + 1, batchSize: T, threads: 1, flashAttention: false,
                                             experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
  const sequence = context.getSequence();
  let sum = 0;
  for (let w = 0; w < WINDOWS; w++) {
    await sequence.clearHistory();
    const input = [];
    for (let t = 0; t < T; t++) input.push([token(w * T + t), {generateNext: {probabilities: true}}]);
    const out = await sequence.controlledEvaluate(input);
    for (let t = 0; t < T; t++) sum -= Math.log(out[t].next.probabilities.get(token(w * T + t + 1)));
  }
  await context.dispose();
  await model.dispose();
  const ce = sum / (WINDOWS * T);
  console.log(`${file}\t${fs.statSync(file).size} bytes\tloss ${ce.toFixed(6)}\tperplexity ${Math.exp(ce).toFixed(4)}`);
}
