/*
 * test_cuda_host: the CUDA decoding kernel (cu/attention/attention_decode.cu)
 * run on the host (tests/cuda_host/cuda_host.h: a block's threads as host
 * threads, a warp's in lockstep at each shuffle), against the suite's
 * double-precision reference and its error bounds
 * (kiln_attention_reference_row, src/ref/attention_operand.h, whose
 * indexing also gives the strides passed), so the suite checks its results
 * where there is no GPU. The
 * build compiles it once per parameter set (tests/CMakeLists.txt: warps,
 * rows, head dimension, split, storage and switches as -D options, as the
 * plan passes them); this program runs that build on every (query heads per
 * kv head, query positions) making its rows, in both layouts and the
 * three mask kinds, over key
 * counts around its batches of keys and, split, over splits that do not
 * divide the keys, keys shorter than a split and splits hidden whole by key
 * lengths or causal masking. The outputs are poisoned first; a split build's
 * partial outputs are merged by the combine kernel's algebra in double.
 * fp16 storage converts by inline PTX and is left to the GPU suite.
 */
#include "cuda_host/cuda_host.h"
#include "ref/attention_operand.h"

/* The build's storage (KT_BF16), named before the kernel's switches
   KILN_F16 and KILN_BF16 take the names of kiln's types. */
static const kiln_dtype kt_dtype = KT_BF16 ? KILN_BF16 : KILN_F32;
#define KILN_F16 0
#define KILN_BF16 KT_BF16
#include "attention/attention_decode.cu"

#include <stdio.h>
#include <stdlib.h>

#include <vector>

namespace {

/* A problem of the build's rows: a descriptor (the reference's) and the
   split the plan would pass. */
struct problem {
    kiln_attention_desc d;
    int split_len;      /* keys a split (a split build), else 0 */
    int32_t lengths[2]; /* key lengths of the two batch items (KILN_ATTN_KEY_LENGTHS) */
};

/* What the kernel reads and writes for one problem: the inputs in storage
   type beside the values the reference reads (bf16-rounded), and the
   strides the plan passes, derived from the reference's own indexing. */
struct operands {
    std::vector<storage> q, k, v, o;
    std::vector<float> qv, kv, vv, mask, lse, part, part_lse;
    unsigned long q_sb, q_sh, q_ss, kv_sb, kv_sh, kv_ss, m_sb, m_sh;
    int splits;
};

/* What a launch's threads read: the problem and its operands. */
struct launch {
    const problem *p;
    operands *x;
};

double uniform() { return rand() / (double)RAND_MAX * 2.0 - 1.0; }

/* A fresh value in storage, and the value the reference reads. */
storage stored(double x, float *seen)
{
#if KILN_BF16
    const storage h = kiln_ref_to_bf16((float)x);
    *seen = kiln_ref_from_bf16(h);
    return h;
#else
    return *seen = (float)x;
#endif
}

#if !KILN_DECODE_SPLIT
/* A value of O as stored. */
float loaded(storage s)
{
#if KILN_BF16
    return kiln_ref_from_bf16(s);
#else
    return s;
#endif
}
#endif

void fill(std::vector<storage> &raw, std::vector<float> &seen, size_t n)
{
    raw.resize(n), seen.resize(n);
    for (size_t e = 0; e < n; e++)
        raw[e] = stored(uniform(), &seen[e]);
}

void body(void *arg)
{
    const launch *l = (const launch *)arg;
    const problem &p = *l->p;
    const kiln_attention_desc &d = p.d;
    operands &x = *l->x;
    attention_decode(x.q.data(), x.k.data(), x.v.data(), x.mask.data(), p.lengths, x.o.data(), x.lse.data(),
                     (int)d.seq_q, (int)d.seq_kv, D, (int)d.heads, (int)(d.heads / d.kv_heads), x.q_sb, x.q_sh, x.q_ss,
                     x.kv_sb, x.kv_sh, x.kv_ss, x.m_sb, x.m_sh, (float)(d.scale * 1.4426950408889634), x.part.data(),
                     x.part_lse.data(), p.split_len);
}

/* Runs one problem; the count of wrong values (printing the first few). */
int check(const problem &p, const char *label)
{
    const kiln_attention_desc &d = p.d;
    operands x;
    x.splits = KILN_DECODE_SPLIT ? ((int)d.seq_kv + p.split_len - 1) / p.split_len : 1;
    /* Strides: the steps of the reference's element indices, which are 0
       at (0, 0, 0). */
    x.q_sb = kiln_attention_at(&d, d.seq_q, d.heads, 1, 0, 0),
    x.q_sh = kiln_attention_at(&d, d.seq_q, d.heads, 0, 1, 0);
    x.q_ss = kiln_attention_at(&d, d.seq_q, d.heads, 0, 0, 1);
    x.kv_sb = kiln_attention_at(&d, d.seq_kv, d.kv_heads, 1, 0, 0);
    x.kv_sh = kiln_attention_at(&d, d.seq_kv, d.kv_heads, 0, 1, 0);
    x.kv_ss = kiln_attention_at(&d, d.seq_kv, d.kv_heads, 0, 0, 1);
    x.m_sb = kiln_attention_mask_at(&d, 1, 0, 0, 0), x.m_sh = kiln_attention_mask_at(&d, 0, 1, 0, 0);
    fill(x.q, x.qv, kiln_attention_operand_count(&d, KILN_ATTENTION_OP_Q));
    fill(x.k, x.kv, kiln_attention_operand_count(&d, KILN_ATTENTION_OP_K));
    fill(x.v, x.vv, kiln_attention_operand_count(&d, KILN_ATTENTION_OP_V));
    x.mask.resize(kiln_attention_operand_count(&d, KILN_ATTENTION_OP_MASK));
    for (float &e : x.mask)
        e = rand() % 10 == 0 ? -INFINITY : (float)uniform();
    for (size_t j = 0; j < d.seq_kv && !x.mask.empty(); j++) /* a row no key is visible to */
        x.mask[j] = -INFINITY;
    const size_t rows = d.batch * d.heads * d.seq_q;
    float poison;
    x.o.assign(x.q.size(), stored(NAN, &poison));
    x.lse.assign(rows, NAN);
    x.part.assign((size_t)x.splits * rows * D, NAN), x.part_lse.assign((size_t)x.splits * rows, NAN);
    launch l = {&p, &x};
    if (cuda_host_launch(dim3{(unsigned)x.splits, (unsigned)(d.batch * d.kv_heads), 1},
                         dim3{(unsigned)(WARPS * 32), 1, 1}, body, &l) != 0) {
        printf("%s: the host could not start a block's threads\n", label);
        return 1;
    }
    const struct kiln_attention_inputs in = {x.qv.data(), x.kv.data(), x.vv.data(), x.mask.data(), p.lengths};
    std::vector<double> scores(d.seq_kv), out(D), bound(D);
    int bad = 0;
    for (size_t b = 0; b < d.batch; b++)
        for (size_t h = 0; h < d.heads; h++)
            for (size_t i = 0; i < d.seq_q; i++) {
                struct kiln_attention_row ref = {out.data(), bound.data(), 0.0, 0.0};
                kiln_attention_reference_row(&d, &in, b, h, i, scores.data(), &ref);
                const size_t row = (b * d.heads + h) * d.seq_q + i;
                for (int e = 0; e < D; e++) {
#if KILN_DECODE_SPLIT
                    /* The combine kernel's merge: lse = log sum exp(lse_s), O = sum exp(lse_s - lse) O_s. */
                    double high = -INFINITY, weights = 0.0, got = 0.0;
                    for (int sp = 0; sp < x.splits; sp++)
                        high = std::max(high, (double)x.part_lse[sp * rows + row]);
                    for (int sp = 0; sp < x.splits && high > -INFINITY; sp++) {
                        const double w = exp(x.part_lse[sp * rows + row] - high);
                        weights += w, got += w * x.part[(sp * rows + row) * D + e];
                    }
                    got = weights > 0.0 ? got / weights : 0.0;
#else
                    const double got = loaded(x.o[kiln_attention_at(&d, d.seq_q, d.heads, b, h, i) + e]);
#endif
                    if (!(fabs(got - out[e]) <= bound[e]) && bad++ < 5)
                        printf("%s: O(b%zu h%zu i%zu d%d) = %.9g, reference %.9g, bound %.3g\n", label, b, h, i, e, got,
                               out[e], bound[e]);
                }
#if KILN_ATTN_LSE && !KILN_DECODE_SPLIT
                const double v = x.lse[row];
                if (!(isinf(ref.lse) ? v == ref.lse : fabs(v - ref.lse) <= ref.lse_bound) && bad++ < 5)
                    printf("%s: lse(b%zu h%zu i%zu) = %.9g, reference %.9g, bound %.3g\n", label, b, h, i, v, ref.lse,
                           ref.lse_bound);
#endif
            }
    return bad;
}

} // namespace

int main()
{
    srand(20261130);
    /* Key counts around the warps' batches of keys (WARPS x 8 or x 4), and
       for a split build the split lengths with them. */
    const int unit = WARPS * UNROLL;
    const struct {
        int nk, split_len;
    } keys[] = {{1, 1},
                {unit - 1, KILN_DECODE_SPLIT ? 7 : 0},
                {unit + 1, KILN_DECODE_SPLIT ? unit : 0},
                {3 * unit + 5, KILN_DECODE_SPLIT ? 2 * unit + 3 : 0},
                {5 * unit, KILN_DECODE_SPLIT ? 5 * unit + 9 : 0}}; /* keys shorter than a split */
    static const kiln_attention_mask masks[] = {KILN_ATTENTION_MASK_BHQK, KILN_ATTENTION_MASK_BQK,
                                                KILN_ATTENTION_MASK_QK};
    static const char *const mask_names[] = {"bhqk", "bqk", "qk"};
    int failed = 0, ran = 0;
    for (int group = 1; group <= ROWS; group++) {
        if (ROWS % group)
            continue;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            problem p = {};
            kiln_attention_desc &d = p.d;
            d.layout = k % 2 ? KILN_BHSD : KILN_BSHD;
            d.dtype = kt_dtype;
            d.batch = 2, d.kv_heads = 2, d.heads = 2 * (size_t)group, d.seq_q = (size_t)(ROWS / group);
            d.seq_kv = (size_t)keys[k].nk, d.head_dim = D;
            d.scale = (float)(1.0 / sqrt((double)D));
            d.causal = KILN_ATTN_CAUSAL, d.key_lengths = KILN_ATTN_KEY_LENGTHS, d.lse = KILN_ATTN_LSE;
            d.mask = KILN_ATTN_MASK ? masks[k % 3] : KILN_ATTENTION_MASK_NONE;
            p.split_len = keys[k].split_len;
            p.lengths[0] = keys[k].nk - keys[k].nk / 3, p.lengths[1] = k % 2 ? 0 : keys[k].nk / 2;
            char label[160];
            snprintf(label, sizeof label,
                     "attention_decode %d warps, %d rows (%d heads a kv head x %zu queries), d%d, %d keys", WARPS, ROWS,
                     group, d.seq_q, D, keys[k].nk);
            if (KILN_DECODE_SPLIT)
                snprintf(label + strlen(label), sizeof label - strlen(label), ", splits of %d", p.split_len);
            snprintf(label + strlen(label), sizeof label - strlen(label), ", %s%s%s", k % 2 ? "bhsd" : "bshd",
                     KILN_ATTN_MASK ? ", mask " : "", KILN_ATTN_MASK ? mask_names[k % 3] : "");
            const int bad = check(p, label);
            printf("%s %s\n", bad ? "FAILED" : "ok", label);
            failed += bad != 0, ran++;
        }
    }
    printf("%d of %d problems wrong\n", failed, ran);
    return failed != 0;
}
