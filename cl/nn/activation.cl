/*
 * y = act(x) element-wise with the epilogue's activation (KILN_ACT); y may
 * be x. KILN_UTIL_WG is the work-group size from the profile.
 */
#include "common/epilogue.h"
#include "common/portability.h"

KILN_KERNEL KILN_WORK_GROUP_SIZE(KILN_UTIL_WG, 1, 1)
void nn_activation(KILN_GLOBAL const float *x, KILN_GLOBAL float *y, const ulong count, const float slope)
{
    const size_t i = KILN_GLOBAL_ID(0);
    if (i < count)
        y[i] = kiln_activate(x[i], slope);
}
