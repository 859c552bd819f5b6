/*
 * Vector helpers for a kernel that defines its vector width VW (1, 2, 4, 8
 * or 16) before including this: VEC is floatVW (float for 1), IVEC the int
 * vector of the same width (what comparing two VECs gives), ANY(c) whether
 * any lane of such a comparison holds, VLOAD / VSTORE move floats, VLOAD_S /
 * VSTORE_S move the storage type (fp16 converted on the way).
 */
#ifndef KILN_CL_VECTOR_H
#define KILN_CL_VECTOR_H

#include "common/storage.h"

#if VW == 1 /* OpenCL has no float1, vload1 or vload_half1 */
#define VEC float
#define IVEC int
#define ANY(c) (c) /* a scalar comparison gives 1, whose sign bit any() would miss */
#define VLOAD(i, p) ((p)[i])
#define VSTORE(v, i, p) ((p)[i] = (v))
#define VLOAD_S(i, p) KILN_LOAD((p), (i))
#define VSTORE_S(v, i, p) KILN_STORE((v), (p), (i))
#else
#define VEC CAT(float, VW)
#define IVEC CAT(int, VW)
#define ANY(c) any(c)
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

#endif
