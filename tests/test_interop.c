/* Wrapping a caller's OpenCL objects without taking ownership. */
#include <stdio.h>
#include <string.h>

#include "kiln/kiln_cl.h"
#include "test_util.h"

struct native {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
};

/* The caller's own context and queue, on the device the other tests use
   (kiln's default, as KILN_DEVICE selects it), not the first one listed. */
static void native_open(struct native *n, cl_command_queue_properties props)
{
    kiln_context *chosen = NULL;
    kt_assert_status(kiln_context_create(NULL, &chosen), KILN_SUCCESS);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(chosen, &info), KILN_SUCCESS);
    if (strcmp(info.backend, "opencl") != 0) {
        printf("# skipped: OpenCL interoperation, on a %s device\n", info.backend);
        kiln_context_destroy(chosen);
        skip();
    }
    kt_assert_status(kiln_context_get_cl(chosen, NULL, &n->device, NULL), KILN_SUCCESS);
    kiln_context_destroy(chosen);
    cl_int err;
    assert_int_equal(clGetDeviceInfo(n->device, CL_DEVICE_PLATFORM, sizeof n->platform, &n->platform, NULL),
                     CL_SUCCESS);
    n->context = clCreateContext(NULL, 1, &n->device, NULL, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    n->queue = clCreateCommandQueue(n->context, n->device, props, &err);
    if (err != CL_SUCCESS)
        n->queue = NULL;
}

static void native_close(struct native *n)
{
    if (n->queue)
        clReleaseCommandQueue(n->queue);
    clReleaseContext(n->context);
}

static cl_uint context_refs(cl_context c)
{
    cl_uint refs = 0;
    assert_int_equal(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL), CL_SUCCESS);
    return refs;
}

static cl_uint mem_refs(cl_mem m)
{
    cl_uint refs = 0;
    assert_int_equal(clGetMemObjectInfo(m, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL), CL_SUCCESS);
    return refs;
}

static void test_wrapped_context_runs_kernels_and_is_given_back(void **state)
{
    (void)state;
    struct native n;
    native_open(&n, 0);
    assert_non_null(n.queue);
    cl_uint refs = context_refs(n.context);

    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_wrap_cl(n.context, n.device, n.queue, NULL, &ctx), KILN_SUCCESS);
    cl_context c;
    cl_device_id d;
    cl_command_queue q;
    kt_assert_status(kiln_context_get_cl(ctx, &c, &d, &q), KILN_SUCCESS);
    assert_ptr_equal(c, n.context);
    assert_ptr_equal(d, n.device);
    assert_ptr_equal(q, n.queue);
    kiln_device_info info;
    kt_assert_status(kiln_context_get_device_info(ctx, &info), KILN_SUCCESS);
    assert_true(strlen(info.profile) > 0);

    /* kiln fills a buffer the caller allocated; the caller reads it with OpenCL. */
    enum { N = 1000 };
    cl_int err;
    cl_mem mem = clCreateBuffer(n.context, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    const cl_uint mem_before = mem_refs(mem);
    kiln_buffer *buf = NULL;
    kt_assert_status(kiln_buffer_wrap_cl(ctx, mem, &buf), KILN_SUCCESS);
    assert_int_equal(kiln_buffer_size(buf), N * sizeof(float));
    assert_ptr_equal(kiln_buffer_get_cl(buf), mem);
    assert_int_equal(mem_refs(mem), mem_before + 1);
    kt_assert_status(kiln_buffer_fill_f32(buf, 10, N - 20, 7.0f), KILN_SUCCESS);
    kt_assert_status(kiln_context_finish(ctx), KILN_SUCCESS);
    float host[N];
    for (int i = 0; i < N; i++)
        host[i] = -1.0f;
    assert_int_equal(clEnqueueWriteBuffer(n.queue, mem, CL_TRUE, 0, 10 * sizeof(float), host, 0, NULL, NULL),
                     CL_SUCCESS);
    assert_int_equal(clEnqueueReadBuffer(n.queue, mem, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL), CL_SUCCESS);
    for (int i = 10; i < N - 10; i++)
        assert_true(host[i] == 7.0f);
    kiln_buffer_destroy(buf);
    assert_int_equal(mem_refs(mem), mem_before);

    kiln_context_destroy(ctx);
    clReleaseMemObject(mem);                         /* a cl_mem holds a reference on its context too */
    assert_int_equal(context_refs(n.context), refs); /* every reference kiln took is given back */
    native_close(&n);
}

static void test_wrap_rejects_mismatched_objects(void **state)
{
    (void)state;
    struct native a, b;
    native_open(&a, 0);
    native_open(&b, 0);
    kiln_context *ctx = (kiln_context *)(uintptr_t)0x5a5a;
    kt_assert_status(kiln_context_wrap_cl(NULL, a.device, a.queue, NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_wrap_cl(a.context, NULL, a.queue, NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_wrap_cl(a.context, a.device, NULL, NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_context_wrap_cl(a.context, a.device, b.queue, NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error_detail(), "queue"));
    assert_ptr_equal(ctx, (kiln_context *)(uintptr_t)0x5a5a);
    kt_assert_status(kiln_context_wrap_cl(a.context, a.device, a.queue, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);

    /* A cl_mem of another cl_context. */
    kt_assert_status(kiln_context_wrap_cl(a.context, a.device, a.queue, NULL, &ctx), KILN_SUCCESS);
    cl_int err;
    cl_mem foreign = clCreateBuffer(b.context, CL_MEM_READ_WRITE, 64, NULL, &err);
    assert_int_equal(err, CL_SUCCESS);
    const cl_uint foreign_refs = mem_refs(foreign);
    kiln_buffer *buf = (kiln_buffer *)(uintptr_t)0x5a5a;
    kt_assert_status(kiln_buffer_wrap_cl(ctx, foreign, &buf), KILN_ERROR_INVALID_ARGUMENT);
    kt_assert_status(kiln_buffer_wrap_cl(ctx, NULL, &buf), KILN_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(buf, (kiln_buffer *)(uintptr_t)0x5a5a);
    assert_int_equal(mem_refs(foreign), foreign_refs);
    assert_null(kiln_buffer_get_cl(NULL));
    kt_assert_status(kiln_context_get_cl(NULL, NULL, NULL, NULL), KILN_ERROR_INVALID_ARGUMENT);
    clReleaseMemObject(foreign);
    kiln_context_destroy(ctx);
    native_close(&a);
    native_close(&b);
}

static void test_out_of_order_queue_is_refused(void **state)
{
    (void)state;
    struct native n;
    native_open(&n, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
    if (!n.queue) {
        native_close(&n);
        printf("# skipped: the driver has no out-of-order queues\n");
        skip();
    }
    kiln_context *ctx = NULL;
    kt_assert_status(kiln_context_wrap_cl(n.context, n.device, n.queue, NULL, &ctx), KILN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(kiln_last_error_detail(), "in-order"));
    native_close(&n);
}

int main(void)
{
    struct kt_list tests = {0};
    kt_add(&tests, cmocka_unit_test(test_wrapped_context_runs_kernels_and_is_given_back));
    kt_add(&tests, cmocka_unit_test(test_wrap_rejects_mismatched_objects));
    kt_add(&tests, cmocka_unit_test(test_out_of_order_queue_is_refused));
    return kt_run_with("interop", &tests, NULL, NULL);
}
