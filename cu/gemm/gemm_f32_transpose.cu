/*
 * gemm_f32_transpose: a batch of fp32 matrices stored rows x cols (cols
 * contiguous, rows ld apart, batch items stride apart, from element off)
 * copied transposed, bit for bit, to dst: cols rows of `rows` values, rows
 * dst_ld apart, batch items dst_stride apart. The wgmma family's TF32
 * kernel (gemm_f16_wgmma.cu) reads A and B K-major only; the host copies an
 * operand stored the other way into its plan's workspace so first.
 *
 * A block moves a 32 x 32 tile through shared memory (rows padded by one
 * value: the column reads fall in 32 banks), reading and writing whole
 * rows of 32 values.
 *
 * Launch: block (32, 8), grid (ceil(cols / 32), ceil(rows / 32), batch).
 */

/* The signature keeps one line per operand. */
/* clang-format off */
extern "C" __global__ void __launch_bounds__(256)
gemm_f32_transpose(const int rows, const int cols,
                   const float *__restrict__ src, const unsigned long off, const int ld, const unsigned long stride,
                   float *__restrict__ dst, const int dst_ld, const unsigned long dst_stride)
/* clang-format on */
{
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, tx = threadIdx.x, ty = threadIdx.y;
    src += off + blockIdx.z * stride;
    dst += blockIdx.z * dst_stride;
#pragma unroll
    for (int i = ty; i < 32; i += 8)
        if (r0 + i < rows && c0 + tx < cols)
            tile[i][tx] = src[(size_t)(r0 + i) * ld + c0 + tx];
    __syncthreads(); /* the tile is whole */
#pragma unroll
    for (int i = ty; i < 32; i += 8)
        if (c0 + i < cols && r0 + tx < rows)
            dst[(size_t)(c0 + i) * dst_ld + r0 + tx] = tile[tx][i];
}
