/* Token shard reader, through the path API (mmap of an in-memory file): a shard that opens must
 * have every token below its vocabulary, and out-of-range reads must be refused. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "ufp4/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ufp4_shard_info info;
  fuzz_check_error(ufp4_shard_header_parse(data, size, "fuzz.tok", &info), "fuzz.tok");
  fuzz_file f;
  fuzz_file_make(&f, data, size);
  ufp4_shard s;
  int rc = ufp4_shard_open(f.path, &s);
  fuzz_check_error(rc, f.path);
  if (!rc) {
    uint32_t buf[64];
    uint64_t n = s.info.token_count;
    size_t take = n < 64 ? (size_t)n : 64;
    if (ufp4_shard_read(&s, n - take, take, buf)) abort();
    for (size_t i = 0; i < take; i++)
      if (buf[i] >= s.info.vocab_size) abort();
    if (!ufp4_shard_read(&s, n, 1, buf)) abort();
    if (!ufp4_shard_read(&s, UINT64_MAX, 2, buf)) abort();
    ufp4_shard_close(&s);
  }
  fuzz_file_drop(&f);
  return 0;
}
