/* model_io.c's evaluation loop on a model the caller already holds (the hf-nvfp4 calibration
 * sets a probe on it first). */
#ifndef UFP4_TRAINING_MODEL_IO_INTERNAL_H
#define UFP4_TRAINING_MODEL_IO_INTERNAL_H

#include "ufp4/model_io.h"

/* ufp4_eval_checkpoint's work after loading: m's loss over the first `batches` batches of `batch`
 * windows of the validation shard `data`; fills res (path, batches, seq_len, loss). */
int model_io_eval(ufp4_model *m, const char *data, long batches, int batch, ufp4_eval_result *res);

#endif
