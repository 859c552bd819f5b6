/* kiln-bench: shared helpers of the benchmark subcommands. */
#ifndef KILN_BENCH_H
#define KILN_BENCH_H

#include <stddef.h>

/* Monotonic time in milliseconds. */
double bench_now_ms(void);

/* Median of n values (sorts them in place). */
double bench_median(double *values, size_t n);

/* Subcommands: argc/argv start at the subcommand's own arguments. */
int bench_jit(int argc, char **argv);

#endif /* KILN_BENCH_H */
