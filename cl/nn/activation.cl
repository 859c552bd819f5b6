/*
 * y = act(x) element-wise with the epilogue's activation (KILN_ACT); y may
 * be x. KILN_UTIL_WG is the work-group size from the profile.
 */
#include "common/epilogue.h"

__kernel __attribute__((reqd_work_group_size(KILN_UTIL_WG, 1, 1)))
void nn_activation(__global const float *x, __global float *y, const ulong count, const float slope)
{
    const size_t i = get_global_id(0);
    if (i < count)
        y[i] = kiln_activate(x[i], slope);
}
