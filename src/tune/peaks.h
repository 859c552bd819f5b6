/*
 * The device's fp32 arithmetic peak and memory bandwidth, measured on it:
 * a multiply-add loop, a copy and a read (cl/util/peak.cl), each timed as find
 * times candidates (a warm-up, then the median of several runs, by device
 * time where the backend has it). kiln-tune records them in a tuned profile
 * (device.peak_gflops, device.peak_gbps) so that every efficiency figure is
 * against what the device reaches, not what a datasheet says.
 */
#ifndef KILN_TUNE_PEAKS_H
#define KILN_TUNE_PEAKS_H

#include "kiln/kiln.h"

struct kiln_peaks {
    double gflops;       /* fp32 multiply-adds, GFLOP/s */
    double gbps;         /* the memory bandwidth: the faster of copy_gbps and read_gbps */
    double copy_gbps;    /* a copy: bytes read plus bytes written, GB/s */
    double read_gbps;    /* a read (a sum) of one of the copy's buffers, GB/s */
    double fma_ms;       /* median time of one multiply-add launch */
    double copy_ms;      /* median time of one copy */
    double read_ms;      /* median time of one read */
    size_t copy_bytes;   /* size of each of the two copy buffers, and of the read */
    double fma_checksum; /* what the fastest multiply-add kernel computed per work-item (8 when right) */
    int fma_lanes;       /* its vector width: 8 or 16 floats (1 on backends without vector syntax) */
};

/* Measure both on the context's device, sizing each launch to take at least
   about 20 ms; the peak is the fastest of the multiply-add kernels (float8
   and float16 chains: which reaches it depends on the device's compiler).
   The bandwidth is the faster of a copy and a read: a read alone moves more
   on some devices (a CPU whose stores first read the line they write: a
   copy's counted bytes are then two thirds of what it moves).
   Statuses of buffer creation, kernel builds and launches;
   KILN_ERROR_DEVICE if a multiply-add kernel or the read computed a wrong
   value. */
kiln_status kiln_measure_peaks(kiln_context *ctx, struct kiln_peaks *out);

/* The bandwidth alone (gbps and the copy's and read's fields; the rest 0). */
kiln_status kiln_measure_bandwidth(kiln_context *ctx, struct kiln_peaks *out);

#endif /* KILN_TUNE_PEAKS_H */
