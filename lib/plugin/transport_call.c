/* Checked calls into transport vtables; see transport_call.h. */
#include "plugin/transport_call.h"

#include <string.h>

#include "plugin/plug.h"

static const pw__plug_kind_t pw_transport_kind = {
    "transport", "(unnamed transport)", PW_TRANSPORT_VTABLE_SIZE_V1,
    offsetof(pw_transport_vtable_t, name), true};

static const void* pw_transport_vtable(const pw_transport_t* transport) {
  return transport ? (const void*)transport->vtable : NULL;
}

const char* pw__transport_name(const pw_transport_t* transport) {
  return pw__plug_name(&pw_transport_kind, pw_transport_vtable(transport));
}

pw_status_t pw__transport_check(const pw_transport_t* transport) {
  return pw__plug_check(&pw_transport_kind, pw_transport_vtable(transport));
}

bool pw__transport_has(const pw_transport_t* transport, size_t method_offset,
                       size_t method_size) {
  return pw__plug_has(pw_transport_vtable(transport), method_offset, method_size);
}

void pw__transport_destroy(const pw_transport_t* transport) {
  if (PW__TRANSPORT_HAS(transport, destroy)) transport->vtable->destroy(transport->self);
}

static pw_status_t pw_transport_check_endpoint(const pw_transport_endpoint_t* e,
                                               const char* side, size_t size) {
  if (e->backend == NULL || e->backend->vtable == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "transport copy: %s.backend is NULL",
                          side);
  }
  if (e->memory == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "transport copy: %s.memory is NULL",
                          side);
  }
  if (size > SIZE_MAX - e->offset) {
    return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                          "transport copy: %s.offset %zu + size %zu overflows", side, e->offset,
                          size);
  }
  return NULL;
}

pw_status_t pw__transport_copy(const pw_transport_t* transport,
                               const pw_transport_copy_t* copy) {
  if (copy == NULL || copy->struct_size < PW_TRANSPORT_COPY_SIZE_V1) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport '%s' copy: descriptor is NULL or its struct_size is below "
                          "v1 (%zu)",
                          pw__transport_name(transport), (size_t)PW_TRANSPORT_COPY_SIZE_V1);
  }
  if (copy->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "transport '%s' copy: done is NULL",
                          pw__transport_name(transport));
  }
  PW_RETURN_IF_ERROR_CTX(pw_transport_check_endpoint(&copy->src, "src", copy->size),
                         "transport '%s'", pw__transport_name(transport));
  PW_RETURN_IF_ERROR_CTX(pw_transport_check_endpoint(&copy->dst, "dst", copy->size),
                         "transport '%s'", pw__transport_name(transport));
  if (!PW__TRANSPORT_HAS(transport, copy)) {
    return pw__plug_unimplemented(&pw_transport_kind, pw_transport_vtable(transport), "copy");
  }
  return transport->vtable->copy(transport->self, copy);
}

pw_status_t pw_transport_copy_extent(const pw_transport_copy_t* copy, size_t* out_src,
                                     size_t* out_dst) {
  *out_src = *out_dst = copy->size;
  if (copy->stride_count > PW_TRANSPORT_MAX_STRIDES) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport copy: stride_count %u exceeds %d", copy->stride_count,
                          PW_TRANSPORT_MAX_STRIDES);
  }
  for (uint32_t k = 0; k < copy->stride_count; ++k) {
    const pw_transport_stride_t* l = &copy->strides[k];
    if (l->count == 0) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "transport copy: strides[%u].count is 0", k);
    }
    size_t n = l->count - 1;
    if ((l->src_stride != 0 && n > (SIZE_MAX - *out_src) / l->src_stride) ||
        (l->dst_stride != 0 && n > (SIZE_MAX - *out_dst) / l->dst_stride)) {
      return pw_status_make(PW_STATUS_OUT_OF_RANGE,
                            "transport copy: strides[%u] (%zu rows, strides %zu and %zu) "
                            "overflow",
                            k, l->count, l->src_stride, l->dst_stride);
    }
    *out_src += n * l->src_stride;
    *out_dst += n * l->dst_stride;
  }
  return NULL;
}

bool pw_transport_stride_next(uint32_t count, const pw_transport_stride_t* strides,
                              size_t* idx, size_t* src_offset, size_t* dst_offset) {
  for (uint32_t k = count; k-- > 0;) {
    const pw_transport_stride_t* l = &strides[k];
    if (++idx[k] < l->count) {
      *src_offset += l->src_stride;
      *dst_offset += l->dst_stride;
      return true;
    }
    *src_offset -= (l->count - 1) * l->src_stride;
    *dst_offset -= (l->count - 1) * l->dst_stride;
    idx[k] = 0;
  }
  return false;
}

pw_status_t pw__transport_copy_strided(const pw_transport_t* transport,
                                       const pw_transport_copy_t* copy) {
  if (copy == NULL || copy->struct_size < PW_TRANSPORT_COPY_SIZE_V2) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport '%s' copy_strided: descriptor is NULL or its struct_size "
                          "is below v2 (%zu)",
                          pw__transport_name(transport), (size_t)PW_TRANSPORT_COPY_SIZE_V2);
  }
  if (copy->done == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "transport '%s' copy_strided: done is NULL",
                          pw__transport_name(transport));
  }
  size_t src_extent = 0, dst_extent = 0;
  PW_RETURN_IF_ERROR_CTX(pw_transport_copy_extent(copy, &src_extent, &dst_extent),
                         "transport '%s'", pw__transport_name(transport));
  PW_RETURN_IF_ERROR_CTX(pw_transport_check_endpoint(&copy->src, "src", src_extent),
                         "transport '%s'", pw__transport_name(transport));
  PW_RETURN_IF_ERROR_CTX(pw_transport_check_endpoint(&copy->dst, "dst", dst_extent),
                         "transport '%s'", pw__transport_name(transport));
  if (!PW__TRANSPORT_HAS(transport, copy_strided)) {
    return pw__plug_unimplemented(&pw_transport_kind, pw_transport_vtable(transport),
                                  "copy_strided");
  }
  return transport->vtable->copy_strided(transport->self, copy);
}

bool pw__transport_can_copy(const pw_transport_t* transport, const pw_backend_t* src,
                            uint32_t src_device, const pw_backend_t* dst,
                            uint32_t dst_device) {
  if (!PW__TRANSPORT_HAS(transport, can_copy)) return true;
  return transport->vtable->can_copy(transport->self, src, src_device, dst, dst_device);
}
