/* Element-wise utilities. KILN_UTIL_WG is the work-group size from the profile. */

#include "common/portability.h"

KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void util_fill_f32(KILN_GLOBAL float *x, const ulong first, const ulong count, const float value)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i < count)
        x[first + i] = value;
}
