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

inline float kiln_activate(float v, float slope)
{
#if KILN_ACT == 1
    return fmax(v, 0.0f);
#elif KILN_ACT == 2
    return fmin(fmax(v, 0.0f), 6.0f);
#elif KILN_ACT == 3
    return v < 0.0f ? slope * v : v;
#elif KILN_ACT == 4
    return 1.0f / (1.0f + exp(-v));
#elif KILN_ACT == 5
    return tanh(v);
#elif KILN_ACT == 6
    return 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
#else
    (void)slope;
    return v;
#endif
}

#endif
