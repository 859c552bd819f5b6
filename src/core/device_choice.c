/* The default device and the ranking of selectors; see device_choice.h. */
#include "core/device_choice.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

void kiln_listing_name(const struct kiln_listing *l, char *buf, size_t size)
{
    snprintf(buf, size, "%s:%zu", l->backend->name, l->index);
}

void kiln_pci_address(const struct kiln_device_desc *d, char *buf, size_t size)
{
    if (!d->pci_known)
        snprintf(buf, size, "%s", "");
    else if (d->pci_device < 0)
        snprintf(buf, size, "%04x:%02x", (unsigned)d->pci_domain, (unsigned)d->pci_bus);
    else
        snprintf(buf, size, "%04x:%02x:%02x.0", (unsigned)d->pci_domain, (unsigned)d->pci_bus, (unsigned)d->pci_device);
}

/* Whether two listings by different backends are one device: the same PCI
   domain and bus (and device number where both know it) when both give
   their location; else the same vendor and name. */
static int same_device(const struct kiln_listing *a, const struct kiln_listing *b)
{
    const struct kiln_device_desc *x = &a->desc, *y = &b->desc;
    if (a->backend == b->backend || x->type != y->type)
        return 0;
    if (x->pci_known && y->pci_known)
        return x->pci_domain == y->pci_domain && x->pci_bus == y->pci_bus &&
               (x->pci_device < 0 || y->pci_device < 0 || x->pci_device == y->pci_device);
    return x->vendor_id && x->vendor_id == y->vendor_id && x->name[0] && strcmp(x->name, y->name) == 0;
}

size_t kiln_listing_twin(const struct kiln_listing *l, size_t count, size_t i, char *how, size_t size)
{
    for (size_t j = 0; j < count; j++) {
        if (j == i || !same_device(&l[i], &l[j]))
            continue;
        if (how) {
            /* The fuller of the two addresses. */
            char pci[32];
            kiln_pci_address(l[i].desc.pci_device < 0 ? &l[j].desc : &l[i].desc, pci, sizeof pci);
            if (l[i].desc.pci_known && l[j].desc.pci_known)
                snprintf(how, size, "PCI %s", pci);
            else
                snprintf(how, size, "the same name, %s; no PCI address to compare", l[i].desc.name);
        }
        return j;
    }
    return SIZE_MAX;
}

/* Whether l's backend is its device's vendor's own API. */
static int native(const struct kiln_listing *l)
{
    return l->backend->native_vendor_id && l->backend->native_vendor_id == l->desc.vendor_id;
}

/* Another backend's listing of a device its native backend lists too. */
static int shadowed(const struct kiln_listing *l, size_t count, size_t i)
{
    if (native(&l[i]))
        return 0;
    for (size_t j = 0; j < count; j++)
        if (j != i && native(&l[j]) && same_device(&l[i], &l[j]))
            return 1;
    return 0;
}

static int kind_rank(kiln_device_type t)
{
    return t == KILN_DEVICE_GPU ? 3 : t == KILN_DEVICE_ACCELERATOR ? 2 : t == KILN_DEVICE_CPU ? 1 : 0;
}

static const char *kind_name(kiln_device_type t)
{
    return t == KILN_DEVICE_GPU           ? "GPU"
           : t == KILN_DEVICE_ACCELERATOR ? "accelerator"
           : t == KILN_DEVICE_CPU         ? "CPU"
                                          : "device";
}

/* Kind first, then (for a selector) vector syntax, then the peak, capped
   below the steps of the other two. */
static double rank(const struct kiln_listing *l, int vector_first)
{
    const double peak = l->peak_gflops < 1e11 ? l->peak_gflops : 1e11;
    return kind_rank(l->desc.type) * 1e12 + (vector_first && l->backend->vector_kernels ? 1e11 : 0.0) + peak;
}

size_t kiln_device_best(const struct kiln_listing *l, size_t count,
                        int (*accept)(const void *user, const struct kiln_listing *l), const void *user)
{
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < count; i++)
        if (accept(user, &l[i]) && (best == SIZE_MAX || rank(&l[i], 1) > rank(&l[best], 1)))
            best = i;
    return best;
}

size_t kiln_device_default(const struct kiln_listing *l, size_t count, char *reason, size_t size)
{
    size_t best = SIZE_MAX, of_kind = 0;
    for (size_t i = 0; i < count; i++)
        if (!shadowed(l, count, i) && (best == SIZE_MAX || rank(&l[i], 0) > rank(&l[best], 0)))
            best = i;
    if (best == SIZE_MAX) {
        snprintf(reason, size, "no device");
        return best;
    }
    for (size_t i = 0; i < count; i++)
        of_kind += !shadowed(l, count, i) && l[i].desc.type == l[best].desc.type;
    char name[48];
    kiln_listing_name(&l[best], name, sizeof name);
    const char *kind = kind_name(l[best].desc.type);
    int n = of_kind == 1 ? snprintf(reason, size, "%s, the only %s", name, kind)
                         : snprintf(reason, size, "%s, of %zu %ss the one of highest profile peak (%.0f GFLOP/s)", name,
                                    of_kind, kind, l[best].peak_gflops);
    for (size_t i = 0; i < count && n >= 0 && (size_t)n < size; i++) {
        char how[192], twin[48];
        if (i == best || !shadowed(l, count, i) || kiln_listing_twin(l, count, i, how, sizeof how) != best)
            continue;
        kiln_listing_name(&l[i], twin, sizeof twin);
        n += snprintf(reason + n, size - (size_t)n, "; %s is the same %s (%s), and %s", twin, kind, how,
                      l[best].backend->native_reason ? l[best].backend->native_reason
                                                     : "this backend is its vendor's own API");
    }
    return best;
}
