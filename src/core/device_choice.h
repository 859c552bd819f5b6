/*
 * Which device a context opens when nothing selects one, and how a selector
 * ranks the devices it accepts: pure functions of kiln's device list, so
 * that a test can feed them machines it does not have.
 *
 * One GPU may be listed by two backends (NVIDIA's through OpenCL and
 * through CUDA). Each listing stays a device of its own for the selectors
 * (`opencl:N`, `cuda:N`, an index), but the default never weighs both: a
 * device listed by the backend that is its vendor's own API (struct
 * kiln_backend's native_vendor_id) is chosen through that backend.
 */
#ifndef KILN_DEVICE_CHOICE_H
#define KILN_DEVICE_CHOICE_H

#include <stddef.h>

#include "backend/backend.h"

/* A device as kiln lists it: its description, the backend that lists it,
   its index in that backend's list, and its matched profile's fp32 peak in
   GFLOP/s (0 when unknown). */
struct kiln_listing {
    struct kiln_device_desc desc;
    const struct kiln_backend *backend;
    size_t index;
    double peak_gflops;
};

/* "cuda:0": the listing as KILN_DEVICE=<backend>:N selects it. */
void kiln_listing_name(const struct kiln_listing *l, char *buf, size_t size);

/* The device's PCI address, "0000:65:00.0" (domain:bus:device.function, the
   function 0 as CUDA writes it) or "0000:65" where only the bus is known;
   "" when unknown. */
void kiln_pci_address(const struct kiln_device_desc *d, char *buf, size_t size);

/* The first listing other than l[i] of the same device through another
   backend, SIZE_MAX if none; `how` (may be NULL) says what shows it: "PCI
   0000:65:00.0" when both listings give the bus, else the device's name. */
size_t kiln_listing_twin(const struct kiln_listing *l, size_t count, size_t i, char *how, size_t size);

/* The default device, SIZE_MAX when count is 0. Every listing takes part
   but another backend's listing of a device its native backend lists; of
   those, GPUs before accelerators before CPUs, then the higher profile
   peak, then the first listed. `reason` says why, for kiln-info: the
   listing, how it ranked, and which listing of the same device it was
   preferred to and what its backend gives it. */
size_t kiln_device_default(const struct kiln_listing *l, size_t count, char *reason, size_t size);

/* The best of the listings a selector accepts (accept(user, l) non-zero):
   GPUs before accelerators before CPUs; within a kind, a backend that
   compiles OpenCL's vector syntax first (so `gpu` takes the OpenCL listing
   of a GPU listed twice); then the higher profile peak, then the first
   listed. SIZE_MAX when none is accepted. */
size_t kiln_device_best(const struct kiln_listing *l, size_t count,
                        int (*accept)(const void *user, const struct kiln_listing *l), const void *user);

#endif /* KILN_DEVICE_CHOICE_H */
