/*
 * The fused epilogue of kernels that produce activations:
 *   v = act(alpha * acc + beta * z + bias)
 * Compile-time switches: KILN_ACT (0 none, 1 ReLU, 2 ReLU6, 3 leaky ReLU,
 * 4 sigmoid, 5 tanh, 6 GELU, tanh approximation), KILN_HAS_BIAS, KILN_HAS_Z.
 * alpha, beta and the leaky slope are kernel arguments.
 */
#ifndef KILN_CL_EPILOGUE_H
#define KILN_CL_EPILOGUE_H

#ifndef KILN_ACT
#define KILN_ACT 0
#endif

/* Defines `T name(T v, float slope)` applying KILN_ACT, for a float or a
   float vector type T (the conditional selects per component). */
#if KILN_ACT == 1
#define KILN_ACT_BODY return fmax(v, 0.0f);
#elif KILN_ACT == 2
#define KILN_ACT_BODY return fmin(fmax(v, 0.0f), 6.0f);
#elif KILN_ACT == 3
#define KILN_ACT_BODY return v < 0.0f ? slope * v : v;
#elif KILN_ACT == 4
#define KILN_ACT_BODY return 1.0f / (1.0f + exp(-v));
#elif KILN_ACT == 5
#define KILN_ACT_BODY return tanh(v);
#elif KILN_ACT == 6
#define KILN_ACT_BODY return 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
#else
#define KILN_ACT_BODY return v;
#endif
#define KILN_ACTIVATION_FUNCTION(T, name) \
    inline T name(T v, float slope)       \
    {                                     \
        (void)slope;                      \
        KILN_ACT_BODY                     \
    }

KILN_ACTIVATION_FUNCTION(float, kiln_activate)

#endif
