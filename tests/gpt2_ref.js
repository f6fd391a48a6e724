// Reference GPT-2 token ids from gpt-3-encoder's own index.js, for test_tok_gpt2_ref.
// usage: node gpt2_ref.js [--whole] GPT2_DIR OUT_FILE DOC...
// OUT_FILE gets, per document in argument order, a little-endian uint32 count then that many ids.
//
// The reference's encode() grows its result with Array.concat, quadratic in the document's
// length (minutes for the corpus, whose addresses are single lines). So each document is cut,
// and the pieces encoded separately, where the pattern provably has a match boundary:
//  - before a " " that follows "." and precedes a non-space: the run of "other" characters
//    ending in "." stops at the space in both cases, and " X..." starts a ` ?` match in both;
//  - before a "\n" that precedes a non-space: a whitespace run ending in that "\n" matches all
//    but its last character (\s+(?!\S)), then the "\n" alone (\s+); encoded alone, the piece
//    before the cut ends in the same matches (a trailing whitespace run is one \s+(?!\S) match),
//    and the piece after it starts with the same "\n" match.
// --whole encodes each document in one call instead (the same ids, much slower).
'use strict';
const fs = require('fs');
const path = require('path');
let args = process.argv.slice(2);
const whole = args[0] === '--whole';
if (whole) args = args.slice(1);
const [gpt2Dir, outFile, ...docs] = args;
if (!gpt2Dir || !outFile) {
  console.error('usage: node gpt2_ref.js [--whole] GPT2_DIR OUT_FILE DOC...');
  process.exit(2);
}
const { encode } = require(path.resolve(gpt2Dir, 'index.js'));
const fd = fs.openSync(outFile, 'w');
for (const doc of docs) {
  const text = fs.readFileSync(doc, 'utf8');
  const ids = [];
  for (const chunk of whole ? [text] : text.split(/(?<=\.)(?= \S)|(?=\n\S)/u)) {
    for (const id of encode(chunk)) ids.push(id);
  }
  const buf = new Uint32Array(ids.length + 1);
  buf[0] = ids.length;
  for (let i = 0; i < ids.length; i++) {
    // An undefined id (a merge result missing from encoder.json) must not pass silently as 0.
    if (!Number.isInteger(ids[i])) throw new Error(doc + ': non-integer id at ' + i);
    buf[i + 1] = ids[i];
  }
  fs.writeSync(fd, Buffer.from(buf.buffer));
}
fs.closeSync(fd);
