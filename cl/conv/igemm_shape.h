/*
 * The shape arguments both implicit-GEMM kernels (conv_f32_igemm.cl,
 * conv_f32_igemm_tiled.cl) start with, in the order src/ops/conv_igemm.c
 * passes them: input n x C x H x W, K filters of R x S, output P x Q,
 * strides, top and left padding, dilations and groups.
 */
#ifndef KILN_CL_IGEMM_SHAPE_H
#define KILN_CL_IGEMM_SHAPE_H

#define IGEMM_SHAPE_ARGS                                                                                               \
    const int N, const int C, const int H, const int W, const int K, const int R, const int S, const int P,            \
        const int Q, const int stride_h, const int stride_w, const int pad_top, const int pad_left, const int dil_h,   \
        const int dil_w, const int groups

#endif
