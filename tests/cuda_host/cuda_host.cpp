/*
 * The host stand-in for CUDA's built-ins (cuda_host.h): a block's threads as
 * host threads, a warp's lanes meeting at a barrier of their own around each
 * shuffle's exchange, the block's at __syncthreads.
 */
#include "cuda_host.h"

thread_local dim3 threadIdx, blockIdx;
dim3 gridDim, blockDim;

enum { MAX_THREADS = 1024, WARP = 32 };

static pthread_barrier_t warp_barrier[MAX_THREADS / WARP], block_barrier;
static float exchange[MAX_THREADS];

/* Lane `from` of the caller's warp's values, every lane having put its own. */
static float exchanged(float v, int from)
{
    const unsigned t = threadIdx.x, warp = t / WARP;
    exchange[t] = v;
    pthread_barrier_wait(&warp_barrier[warp]);
    const float got = exchange[warp * WARP + (unsigned)from % WARP];
    pthread_barrier_wait(&warp_barrier[warp]);
    return got;
}

float __shfl_xor_sync(unsigned, float v, int lane_mask) { return exchanged(v, (int)(threadIdx.x % WARP) ^ lane_mask); }

float __shfl_sync(unsigned, float v, int lane) { return exchanged(v, lane); }

void __syncthreads() { pthread_barrier_wait(&block_barrier); }

struct start {
    void (*body)(void *);
    void *arg;
    unsigned thread;
};

/* A thread of every block in turn; a block's threads all finish before
   the next block starts (its __shared__ arrays are the same). */
static void *run(void *p)
{
    const start *s = (const start *)p;
    threadIdx = dim3{s->thread, 0, 0};
    for (unsigned z = 0; z < gridDim.z; z++)
        for (unsigned y = 0; y < gridDim.y; y++)
            for (unsigned x = 0; x < gridDim.x; x++) {
                blockIdx = dim3{x, y, z};
                s->body(s->arg);
                pthread_barrier_wait(&block_barrier);
            }
    return nullptr;
}

int cuda_host_launch(dim3 grid, dim3 block, void (*body)(void *arg), void *arg)
{
    const unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || threads > MAX_THREADS || threads % WARP || block.y != 1 || block.z != 1)
        return -1;
    gridDim = grid, blockDim = block;
    for (unsigned w = 0; w < threads / WARP; w++)
        pthread_barrier_init(&warp_barrier[w], nullptr, WARP);
    pthread_barrier_init(&block_barrier, nullptr, threads);
    static pthread_t id[MAX_THREADS];
    static start starts[MAX_THREADS];
    unsigned started = 0;
    for (; started < threads; started++) {
        starts[started] = start{body, arg, started};
        if (pthread_create(&id[started], nullptr, run, &starts[started]) != 0)
            break;
    }
    /* A block short of threads would wait at its barriers for ever. */
    if (started < threads)
        return -1;
    for (unsigned t = 0; t < threads; t++)
        pthread_join(id[t], nullptr);
    for (unsigned w = 0; w < threads / WARP; w++)
        pthread_barrier_destroy(&warp_barrier[w]);
    pthread_barrier_destroy(&block_barrier);
    return 0;
}
