/* Element-wise utilities. KILN_UTIL_WG is the work-group size from the profile. */

__kernel __attribute__((reqd_work_group_size(KILN_UTIL_WG, 1, 1)))
void util_fill_f32(__global float *x, const ulong first, const ulong count, const float value)
{
    const size_t i = get_global_id(0);
    if (i < count)
        x[first + i] = value;
}
