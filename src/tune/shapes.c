/* The shapes kiln-tune scores candidates on: the representative ones, and
   the CUDA families' own; see tune.h. */
#include <string.h>

#include "ops/attention.h"
#include "ops/conv2d.h"
#include "ops/gemm.h"
#include "tune/tune.h"

struct kiln_tune_shape kiln_tune_gemm_shape(const char *name, size_t m, size_t n, size_t k, size_t batch)
{
    struct kiln_tune_shape s = {.name = name, .op = KILN_TUNE_GEMM};
    kiln_gemm_desc_init(&s.gemm, KILN_ROW_MAJOR, KILN_NO_TRANS, KILN_NO_TRANS, m, n, k);
    if (batch > 1) {
        s.gemm.batch = batch;
        s.gemm.stride_a = m * k, s.gemm.stride_b = k * n, s.gemm.stride_c = m * n;
    }
    return s;
}

/* A layer as a network runs it: folded batch norm as a bias, ReLU,
   weights constant; `rs` x `rs` filters padded to keep the size at stride 1. */
static struct kiln_tune_shape layer(const char *name, kiln_tensor_layout layout, size_t n, size_t c, size_t hw,
                                    size_t k, size_t rs, size_t stride, size_t groups)
{
    struct kiln_tune_shape s = {.name = name, .op = KILN_TUNE_CONV};
    kiln_conv2d_desc *d = &s.conv;
    kiln_conv2d_desc_init(d, layout, n, c, hw, hw, k, rs, rs);
    d->stride_h = d->stride_w = stride;
    d->pad_top = d->pad_bottom = d->pad_left = d->pad_right = rs / 2;
    d->groups = groups;
    d->has_bias = 1;
    d->activation = KILN_ACT_RELU;
    d->constant_weights = 1;
    return s;
}

struct kiln_tune_shape kiln_tune_conv_shape(const char *name, size_t c, size_t hw, size_t k, size_t rs, size_t stride,
                                            size_t groups)
{
    return layer(name, KILN_NCHW, 1, c, hw, k, rs, stride, groups);
}

static struct kiln_tune_shape attention_shape(const char *name, size_t heads, size_t kv_heads, size_t seq_q,
                                              size_t seq_kv, size_t head_dim)
{
    struct kiln_tune_shape s = {.name = name, .op = KILN_TUNE_ATTENTION};
    kiln_attention_desc_init(&s.attention, KILN_BSHD, 1, heads, seq_q, seq_kv, head_dim);
    s.attention.kv_heads = kv_heads;
    return s;
}

const struct kiln_tune_shape *kiln_tune_shapes(unsigned ops, int gpu, size_t *count)
{
    static struct kiln_tune_shape out[KILN_TUNE_SHAPES_MAX];
    /* For a few CPU cores (CPU): each shape a few milliseconds. For a GPU
       (GPU): the shapes of kiln-bench quick and the sizes a GPU runs (a
       single tile leaves most of it idle on the CPU shapes). */
    enum { CPU = 1, GPU = 2 };
    const struct {
        unsigned on;
        struct kiln_tune_shape shape;
    } all[] = {
        {CPU, kiln_tune_gemm_shape("gemm 512x512x512", 512, 512, 512, 1)},
        {CPU, kiln_tune_gemm_shape("gemm 16x1024x1024", 16, 1024, 1024, 1)},
        {CPU, kiln_tune_gemm_shape("gemm 64x64x4096", 64, 64, 4096, 1)},
        {CPU, kiln_tune_gemm_shape("gemm 128x128x128x8", 128, 128, 128, 8)},
        {GPU, kiln_tune_gemm_shape("gemm 2048x2048x2048", 2048, 2048, 2048, 1)},
        {GPU, kiln_tune_gemm_shape("gemm 16x4096x4096", 16, 4096, 4096, 1)},
        {GPU, kiln_tune_gemm_shape("gemm 256x256x16384", 256, 256, 16384, 1)},
        {GPU, kiln_tune_gemm_shape("gemm 512x49x4608", 512, 49, 4608, 1)},
        {GPU, kiln_tune_gemm_shape("gemm 128x128x128x64", 128, 128, 128, 64)},
        {CPU, kiln_tune_conv_shape("conv mobilenet_v1 conv1", 3, 224, 32, 3, 2, 1)},
        {CPU | GPU, kiln_tune_conv_shape("conv mobilenet_v1 conv2_2/dw", 64, 112, 64, 3, 2, 64)},
        {CPU, kiln_tune_conv_shape("conv mobilenet_v1 conv3_1/dw", 128, 56, 128, 3, 1, 128)},
        {CPU, kiln_tune_conv_shape("conv mobilenet_v1 conv4_1/pw", 256, 28, 256, 1, 1, 1)},
        {CPU, kiln_tune_conv_shape("conv mobilenet_v1 conv5_1/dw", 512, 14, 512, 3, 1, 512)},
        {CPU, kiln_tune_conv_shape("conv mobilenet_v1 conv5_1/pw", 512, 14, 512, 1, 1, 1)},
        {CPU | GPU, kiln_tune_conv_shape("conv mobilenet_v1 conv6/pw", 1024, 7, 1024, 1, 1, 1)},
        {CPU | GPU, kiln_tune_conv_shape("conv resnet50 res3b_branch2b", 128, 28, 128, 3, 1, 1)},
        {CPU, kiln_tune_conv_shape("conv resnet50 res4a_branch2b", 256, 28, 256, 3, 2, 1)},
        {CPU, kiln_tune_conv_shape("conv resnet50 res4b_branch2a", 1024, 14, 256, 1, 1, 1)},
        {GPU, kiln_tune_conv_shape("conv resnet50 res5a_branch2b", 512, 14, 512, 3, 2, 1)},
        {CPU, attention_shape("attention prefill h4 n512 d64", 4, 4, 512, 512, 64)},
        {CPU, attention_shape("attention prefill h4 n512 d128", 4, 4, 512, 512, 128)},
        {CPU, attention_shape("attention decode h32/8 kv4096 d128", 32, 8, 1, 4096, 128)},
        {GPU, attention_shape("attention prefill h8 n4096 d64", 8, 8, 4096, 4096, 64)},
        {GPU, attention_shape("attention prefill h8 n2048 d128", 8, 8, 2048, 2048, 128)},
        {GPU, attention_shape("attention decode h32/8 kv8192 d128", 32, 8, 1, 8192, 128)},
    };
    size_t n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all && n < KILN_TUNE_SHAPES_MAX; i++)
        if ((all[i].on & (gpu ? GPU : CPU)) && (ops & (1u << all[i].shape.op)))
            out[n++] = all[i].shape;
    *count = n;
    return out;
}

void kiln_tune_families(const kiln_context *ctx, struct kiln_tune_family out[KILN_TUNE_FAMILIES])
{
    static const struct {
        enum kiln_group_id group;
        enum kiln_tune_op op;
        int algo;
    } families[KILN_TUNE_FAMILIES] = {
        {KILN_GROUP_gemm_mma, KILN_TUNE_GEMM, KILN_GEMM_MMA},
        {KILN_GROUP_gemm_wgmma, KILN_TUNE_GEMM, KILN_GEMM_WGMMA},
        {KILN_GROUP_attention_mma, KILN_TUNE_ATTENTION, KILN_ATTENTION_AUTO},
        {KILN_GROUP_attention_decode, KILN_TUNE_ATTENTION, KILN_ATTENTION_AUTO},
        {KILN_GROUP_conv_mma, KILN_TUNE_CONV, KILN_CONV_IGEMM_MMA},
    };
    for (int f = 0; f < KILN_TUNE_FAMILIES; f++)
        out[f] = (struct kiln_tune_family){families[f].group, families[f].op, families[f].algo, 0, 0, ""};
    out[0].runs = kiln_gemm_mma_runs_on(ctx, KILN_F16, out[0].why_not, sizeof out[0].why_not);
    out[0].bf16 = kiln_gemm_mma_runs_on(ctx, KILN_BF16, NULL, 0);
    out[1].runs = out[1].bf16 = kiln_gemm_wgmma_runs_on(ctx, out[1].why_not, sizeof out[1].why_not);
    out[2].runs = out[2].bf16 = kiln_attention_mma_runs_on(ctx, out[2].why_not, sizeof out[2].why_not);
    out[3].runs = kiln_attention_decode_cuda_runs_on(ctx, KILN_F16, out[3].why_not, sizeof out[3].why_not);
    out[3].bf16 = kiln_attention_decode_cuda_runs_on(ctx, KILN_BF16, NULL, 0);
    out[4].runs = out[4].bf16 = kiln_conv_mma_runs_on(ctx, out[4].why_not, sizeof out[4].why_not);
}

/* The GEMM families' shapes: square, long K (bf16 where the family runs
   it), and wide M over few columns; a whole H100 at a few tens of
   microseconds each. */
static size_t gemm_family_shapes(const struct kiln_tune_family *f, struct kiln_tune_shape *out)
{
    static const size_t sizes[3][3] = {{2048, 2048, 4096}, {1024, 1024, 8192}, {4096, 512, 2048}};
    static const char *const names[2][3][2] = {
        {{"gemm.mma f16 2048x2048x4096", NULL},
         {"gemm.mma f16 1024x1024x8192", "gemm.mma bf16 1024x1024x8192"},
         {"gemm.mma f16 4096x512x2048", NULL}},
        {{"gemm.wgmma f16 2048x2048x4096", NULL},
         {"gemm.wgmma f16 1024x1024x8192", "gemm.wgmma bf16 1024x1024x8192"},
         {"gemm.wgmma f16 4096x512x2048", NULL}},
    };
    const int family = f->group == KILN_GROUP_gemm_wgmma;
    for (int i = 0; i < 3; i++) {
        const int bf16 = f->bf16 && names[family][i][1];
        out[i] = kiln_tune_gemm_shape(names[family][i][bf16], sizes[i][0], sizes[i][1], sizes[i][2], 1);
        out[i].gemm.dtype = bf16 ? KILN_BF16 : KILN_F16;
        out[i].gemm.algo = (kiln_gemm_algo)f->algo;
    }
    return 3;
}

size_t kiln_tune_family_shapes(const struct kiln_tune_family *f, struct kiln_tune_shape *out)
{
    switch (f->group) {
    case KILN_GROUP_attention_mma:
        /* Prefill of a 4096-token context at batch 1, 8 heads, the two head
           dimensions (their kernels differ: one or two row tiles a warp),
           with and without causal masking (which skips half the keys). */
        out[0] = attention_shape("attention.mma f16 h8 n4096 d64", 8, 8, 4096, 4096, 64);
        out[1] = attention_shape("attention.mma f16 h8 n4096 d64 causal", 8, 8, 4096, 4096, 64);
        out[2] = attention_shape("attention.mma f16 h8 n4096 d128", 8, 8, 4096, 4096, 128);
        out[3] = attention_shape("attention.mma f16 h8 n4096 d128 causal", 8, 8, 4096, 4096, 128);
        for (int i = 0; i < 4; i++)
            out[i].attention.dtype = KILN_F16, out[i].attention.causal = i % 2;
        return 4;
    case KILN_GROUP_attention_decode:
        /* A decoding step of grouped-query attention over an 8192-token
           cache, in fp32 (the representative GPU shape's) and fp16. */
        out[0] = attention_shape("attention decode h32/8 kv8192 d128", 32, 8, 1, 8192, 128);
        out[1] = attention_shape("attention.decode f16 h32/8 kv8192 d128", 32, 8, 1, 8192, 128);
        out[1].attention.dtype = KILN_F16;
        return 2;
    case KILN_GROUP_conv_mma:
        /* ResNet-50 layers at batch 8 in NHWC fp16: a 3x3 of stage 2 and
           the 1x1 expansion of stage 4. */
        out[0] = layer("conv.mma f16 3x3 c128 k128 56x56 n8", KILN_NHWC, 8, 128, 56, 128, 3, 1, 1);
        out[1] = layer("conv.mma f16 1x1 c256 k1024 14x14 n8", KILN_NHWC, 8, 256, 14, 1024, 1, 1, 1);
        for (int i = 0; i < 2; i++)
            out[i].conv.dtype = KILN_F16, out[i].conv.algo = (kiln_conv_algo)f->algo;
        return 2;
    default:
        return gemm_family_shapes(f, out);
    }
}
