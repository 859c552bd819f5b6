/* A candidate tried on one convolution; see trial.h. */
#include "tune/trial.h"

#include <string.h>

#include "core/diag.h"

kiln_status kiln_trial_conv(kiln_context *ctx, const kiln_conv2d_desc *desc, int reps, double cutoff_ms, uint64_t seed,
                            struct kiln_trial *out)
{
    (void)ctx, (void)desc, (void)reps, (void)cutoff_ms, (void)seed;
    memset(out, 0, sizeof *out);
    out->verdict = KILN_TRIAL_NO_PLAN;
    out->status = KILN_ERROR_UNSUPPORTED;
    strcpy(out->reason, "kiln_trial_conv: not yet");
    return KILN_SUCCESS;
}
