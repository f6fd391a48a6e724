/* Run configuration JSON (ufp4_train_config_load, the --config and resume reader). */
#include <stdint.h>

#include "fuzz_util.h"
#include "ufp4/train.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_file f;
  fuzz_file_make(&f, data, size);
  ufp4_train_config c = ufp4_train_config_default();
  fuzz_check_error(ufp4_train_config_load(f.path, &c), f.path);
  fuzz_file_drop(&f);
  return 0;
}
