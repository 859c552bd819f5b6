/* Events: completion of queued work, returned on request by asynchronous calls. */
#include <stdlib.h>

#include "core/context.h"
#include "core/diag.h"

kiln_status kiln_event_new(const struct kiln_backend *backend, void *handle, kiln_event **out)
{
    kiln_event *ev = malloc(sizeof *ev);
    if (!ev) {
        backend->event_release(handle);
        return kiln_error(KILN_ERROR_OUT_OF_MEMORY, "allocating an event");
    }
    ev->backend = backend;
    ev->handle = handle;
    *out = ev;
    return KILN_SUCCESS;
}

kiln_status kiln_event_wait(kiln_event *event)
{
    kiln_error_clear();
    KILN_CHECK_ARG(event);
    return event->backend->event_wait(event->handle);
}

void kiln_event_destroy(kiln_event *event)
{
    if (!event)
        return;
    event->backend->event_release(event->handle);
    free(event);
}
