/* Hugging Face LlamaConfig config.json (ufp4_hf_config_read, used when loading a checkpoint):
 * a config that loads must be one the model accepts. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "ufp4/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_file f;
  fuzz_file_make(&f, data, size);
  ufp4_model_config c;
  int rc = ufp4_hf_config_read(f.path, &c);
  fuzz_check_error(rc, f.path);
  if (!rc && ufp4_model_config_check(&c)) abort();
  fuzz_file_drop(&f);
  return 0;
}
