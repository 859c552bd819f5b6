/*
 * The head dimension of the attention kernels: HEAD_DIM, the loop bound
 * (KILN_ATTN_D compiled in, for 64 and 128, or the run-time argument
 * head_dim), and DMAX, the size of the arrays that hold a row (the same
 * constant, or KILN_ATTN_DMAX, head_dim rounded up to a power of two).
 */
#ifndef KILN_ATTENTION_HEAD_DIM_H
#define KILN_ATTENTION_HEAD_DIM_H

#ifdef KILN_ATTN_D
#define HEAD_DIM KILN_ATTN_D
#define DMAX KILN_ATTN_D
#else
#define HEAD_DIM head_dim
#define DMAX KILN_ATTN_DMAX
#endif

#endif /* KILN_ATTENTION_HEAD_DIM_H */
