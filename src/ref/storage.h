/*
 * What storing a result in a tensor's type adds to a reference's error
 * bound, shared by the tests' references and the tuner's checks.
 */
#ifndef KILN_REF_STORAGE_H
#define KILN_REF_STORAGE_H

#include <math.h>

#include "kiln/kiln.h"

/* The rounding of a value near `ref`, already within `b` of it, to storage
   type t: half an ulp of t's significand (11 bits for fp16, 8 for bf16)
   relative, or half the smallest subnormal; nothing for fp32. */
static inline double kiln_ref_storage_bound(kiln_dtype t, double ref, double b)
{
    if (t == KILN_F16)
        return (fabs(ref) + b) * 0x1p-11 + 0x1p-25;
    if (t == KILN_BF16)
        return (fabs(ref) + b) * 0x1p-8 + 0x1p-134;
    return 0.0;
}

#endif /* KILN_REF_STORAGE_H */
