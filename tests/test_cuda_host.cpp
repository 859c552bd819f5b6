/*
 * test_cuda_host: the CUDA decoding kernel (cu/attention/attention_decode.cu)
 * run on the host (tests/cuda_host/cuda_host.h: a block's threads as host
 * threads, a warp's in lockstep at each shuffle), against a double-precision
 * reference, so the suite checks its results where there is no GPU. The
 * build compiles it once per parameter set (tests/CMakeLists.txt: warps,
 * rows, head dimension, split, storage and switches as -D options, as the
 * plan passes them); this program runs that build on every (query heads per
 * kv head, query positions) making its rows, in both layouts, over key
 * counts around its batches of keys and, split, over splits that do not
 * divide the keys, keys shorter than a split and splits hidden whole by key
 * lengths or causal masking. The outputs are poisoned first; a split build's
 * partial outputs are merged by the combine kernel's algebra in double.
 * fp16 storage converts by inline PTX and is left to the GPU suite.
 */
#include "cuda_host/cuda_host.h"

#include "attention/attention_decode.cu"

#include <stdio.h>
#include <stdlib.h>

#include <vector>

#if KILN_F16
#error "test_cuda_host: fp16 storage converts by inline PTX, which the host cannot run"
#endif

namespace {

struct problem {
    int batch, kv_heads, group, nq, nk, split_len, bhsd;
    int mask_per_batch; /* the mask's batch stride is not 0 */
    int lengths[2];     /* key lengths of the two batch items (KILN_ATTN_KEY_LENGTHS) */
};

/* What the kernel reads and writes for one problem, in storage type. */
struct operands {
    std::vector<storage> q, k, v, o;
    std::vector<float> mask, lse, part, part_lse;
    std::vector<int> lengths;
    unsigned long q_sb, q_sh, q_ss, kv_sb, kv_sh, kv_ss, m_sb, m_sh;
    int heads, splits;
    float scale_log2;
};

/* What a launch's threads read: the problem and its operands. */
struct launch {
    const problem *p;
    operands *x;
};

double uniform() { return rand() / (double)RAND_MAX * 2.0 - 1.0; }

/* A value in storage and back (bf16: rounded to the top half of the float). */
storage to_stored(double x)
{
#if KILN_BF16
    return to_storage((float)x);
#else
    return (storage)x;
#endif
}

double from_stored(storage s)
{
#if KILN_BF16
    const uint32_t u = (uint32_t)s << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#else
    return s;
#endif
}

void body(void *arg)
{
    const launch *l = (const launch *)arg;
    const problem &p = *l->p;
    operands &x = *l->x;
    attention_decode(x.q.data(), x.k.data(), x.v.data(), x.mask.data(), x.lengths.data(), x.o.data(), x.lse.data(),
                     p.nq, p.nk, D, x.heads, p.group, x.q_sb, x.q_sh, x.q_ss, x.kv_sb, x.kv_sh, x.kv_ss, x.m_sb, x.m_sh,
                     x.scale_log2, x.part.data(), x.part_lse.data(), p.split_len);
}

/* Runs one problem; the count of wrong values (printing the first few). */
int check(const problem &p, const char *label)
{
    operands x;
    x.heads = p.kv_heads * p.group;
    x.splits = KILN_DECODE_SPLIT ? (p.nk + p.split_len - 1) / p.split_len : 1;
    const unsigned long rows = (unsigned long)p.batch * x.heads * p.nq, kv = (unsigned long)p.nk * p.kv_heads * D;
    if (p.bhsd)
        x.q_ss = D, x.q_sh = (unsigned long)p.nq * D, x.kv_ss = D, x.kv_sh = (unsigned long)p.nk * D;
    else
        x.q_ss = (unsigned long)x.heads * D, x.q_sh = D, x.kv_ss = (unsigned long)p.kv_heads * D, x.kv_sh = D;
    x.q_sb = (unsigned long)p.nq * x.heads * D, x.kv_sb = kv;
    x.m_sh = (unsigned long)p.nq * p.nk, x.m_sb = p.mask_per_batch ? x.heads * x.m_sh : 0;
    x.q.resize(p.batch * x.q_sb), x.k.resize(p.batch * kv), x.v.resize(p.batch * kv);
    for (storage &e : x.q)
        e = to_stored(uniform());
    for (storage &e : x.k)
        e = to_stored(uniform());
    for (storage &e : x.v)
        e = to_stored(uniform());
    x.mask.resize((p.mask_per_batch ? p.batch : 1) * x.heads * x.m_sh);
    for (float &e : x.mask)
        e = rand() % 10 == 0 ? -INFINITY : (float)uniform();
    for (int j = 0; j < p.nk; j++) /* a row no key is visible to */
        x.mask[j] = -INFINITY;
    x.lengths.assign(p.lengths, p.lengths + 2);
    x.o.assign(p.batch * x.q_sb, to_stored(NAN));
    x.lse.assign(rows, NAN);
    x.part.assign((size_t)x.splits * rows * D, NAN), x.part_lse.assign((size_t)x.splits * rows, NAN);
    const double scale = 1.0 / sqrt((double)D);
    x.scale_log2 = (float)(scale * 1.4426950408889634);
    launch l = {&p, &x};
    if (cuda_host_launch(dim3{(unsigned)x.splits, (unsigned)(p.batch * p.kv_heads), 1},
                         dim3{(unsigned)(WARPS * 32), 1, 1}, body, &l) != 0) {
        printf("%s: the host could not start a block's threads\n", label);
        return 1;
    }
    int bad = 0;
    std::vector<double> s(p.nk);
    for (int b = 0; b < p.batch; b++)
        for (int h = 0; h < x.heads; h++)
            for (int i = 0; i < p.nq; i++) {
                const int hk = h / p.group;
                int visible = p.nk;
#if KILN_ATTN_KEY_LENGTHS
                visible = std::min(std::max(p.lengths[b], 0), p.nk);
#endif
#if KILN_ATTN_CAUSAL
                visible = std::min(visible, std::max(i + p.nk - p.nq + 1, 0));
#endif
                double top = -INFINITY;
                for (int j = 0; j < visible; j++) {
                    double dot = 0.0;
                    for (int e = 0; e < D; e++)
                        dot += from_stored(x.q[b * x.q_sb + h * x.q_sh + i * x.q_ss + e]) *
                               from_stored(x.k[b * x.kv_sb + hk * x.kv_sh + j * x.kv_ss + e]);
                    s[j] = dot * scale;
#if KILN_ATTN_MASK
                    s[j] += x.mask[b * x.m_sb + h * x.m_sh + (unsigned long)i * p.nk + j];
#endif
                    top = std::max(top, s[j]);
                }
                double sum = 0.0;
                for (int j = 0; j < visible && top > -INFINITY; j++)
                    sum += exp(s[j] - top);
                const unsigned long row = ((unsigned long)b * x.heads + h) * p.nq + i;
                for (int e = 0; e < D; e++) {
                    double ref = 0.0;
                    for (int j = 0; j < visible && sum > 0.0; j++)
                        ref += exp(s[j] - top) / sum * from_stored(x.v[b * x.kv_sb + hk * x.kv_sh + j * x.kv_ss + e]);
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
                    const double bound = 1e-5;
#else
                    const double got = from_stored(x.o[b * x.q_sb + h * x.q_sh + i * x.q_ss + e]);
                    const double bound = KILN_BF16 ? 1e-5 + fabs(ref) / 128 : 1e-5;
#endif
                    if (!(fabs(got - ref) <= bound) && bad++ < 5)
                        printf("%s: O(b%d h%d i%d d%d) = %.9g, reference %.9g\n", label, b, h, i, e, got, ref);
                }
#if KILN_ATTN_LSE && !KILN_DECODE_SPLIT
                const double lse = sum > 0.0 ? top + log(sum) : -INFINITY, v = x.lse[row];
                if (!(isinf(lse) ? v == lse : fabs(v - lse) <= 1e-5 * (1.0 + fabs(lse))) && bad++ < 5)
                    printf("%s: lse(b%d h%d i%d) = %.9g, reference %.9g\n", label, b, h, i, v, lse);
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
    int failed = 0, ran = 0;
    for (int group = 1; group <= ROWS; group++) {
        if (ROWS % group)
            continue;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
            const problem p = {2,
                               2,
                               group,
                               ROWS / group,
                               keys[k].nk,
                               keys[k].split_len,
                               (int)(k % 2),
                               (int)(k % 3 != 0),
                               {keys[k].nk - keys[k].nk / 3, k % 2 ? 0 : keys[k].nk / 2}};
            char label[160];
            snprintf(label, sizeof label,
                     "attention_decode %d warps, %d rows (%d heads a kv head x %d queries), d%d, %d keys", WARPS, ROWS,
                     group, p.nq, D, p.nk);
            if (KILN_DECODE_SPLIT)
                snprintf(label + strlen(label), sizeof label - strlen(label), ", splits of %d", p.split_len);
            snprintf(label + strlen(label), sizeof label - strlen(label), "%s%s", p.bhsd ? ", bhsd" : ", bshd",
                     p.mask_per_batch ? "" : ", one mask for the batch");
            const int bad = check(p, label);
            printf("%s %s\n", bad ? "FAILED" : "ok", label);
            failed += bad != 0, ran++;
        }
    }
    printf("%d of %d problems wrong\n", failed, ran);
    return failed != 0;
}
