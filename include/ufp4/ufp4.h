/* ufp4: bit-exact 4-bit formats, scaling, RHT and the measures of their bias.
 * Umbrella header; each part is documented in its own header. */
#ifndef UFP4_UFP4_H
#define UFP4_UFP4_H

#include "ufp4/error.h"
#include "ufp4/grid.h"
#include "ufp4/philox.h"
#include "ufp4/minifloat.h"
#include "ufp4/quant.h"
#include "ufp4/rht.h"
#include "ufp4/measures.h"
#include "ufp4/synth.h"
#include "ufp4/npy.h"
#include "ufp4/parallel.h"
#include "ufp4/version.h"

#endif
