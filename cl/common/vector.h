/*
 * Vector helpers for a kernel that defines its vector width VW (1, 2, 4, 8
 * or 16) before including this: VEC is floatVW, VLOAD / VSTORE move floats,
 * VLOAD_S / VSTORE_S move the storage type (fp16 converted on the way).
 */
#ifndef KILN_CL_VECTOR_H
#define KILN_CL_VECTOR_H

#include "common/storage.h"

#define VEC CAT(float, VW)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)
#if KILN_F16
#define VLOAD_S(i, p) CAT(vload_half, VW)((i), (p))
#define VSTORE_S(v, i, p) CAT(vstore_half, VW)((v), (i), (p))
#else
#define VLOAD_S(i, p) VLOAD((i), (p))
#define VSTORE_S(v, i, p) VSTORE((v), (i), (p))
#endif

#endif
