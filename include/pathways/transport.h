/* libpathways: the transport plug.
 *
 * A transport moves shard bytes between device memories that may belong
 * to different backends, slices or hosts: the runtime uses one for graph
 * transfer nodes (a buffer moved to another virtual slice). The host
 * application (or a bundled transport: inproc, net) fills a
 * pw_transport_vtable_t and hands the runtime a pw_transport_t
 * {vtable, self}. Transport authors include only this header (and
 * pathways/backend.h, which it includes: endpoints are backend memories).
 *
 * ABI: the vtable starts with struct_size and only grows at the end. The
 * runtime accepts any struct_size >= PW_TRANSPORT_VTABLE_SIZE_V1 and treats
 * a method that is NULL, or that lies beyond struct_size, as
 * UNIMPLEMENTED — never a crash. The copy descriptor is versioned the same
 * way (PW_TRANSPORT_COPY_SIZE_V1).
 *
 * Threading: every method may be called from any thread, concurrently,
 * except destroy (called once, when no copy is in flight and not from a
 * done callback).
 *
 * Async contract (copy): if copy returns an error, |done| is never called;
 * otherwise |done| is called exactly once, from any thread, possibly inline
 * before copy returns, and it takes ownership of the status it is given
 * (NULL = OK). A transport that breaks it (done twice for one copy, or
 * done and then an error return) is reported naming it, never obeyed: the
 * extra completion is not counted, its status is freed, and the transfer
 * fails with INTERNAL if it comes while the runtime is still issuing that
 * part's copies (always when inline); later it is logged and ignored.
 * |done_user| is opaque: it names the copy and stays valid while the
 * runtime lives. Errors are typed:
 *   INVALID_ARGUMENT   a malformed descriptor (NULL backend or memory, no
 *                      done callback), memory that is not the endpoint
 *                      device's, endpoints this transport cannot serve
 *   OUT_OF_RANGE       offset/size outside either memory (also offset +
 *                      size overflowing)
 *   UNAVAILABLE        a lost peer: a device, host or link that failed
 *   RESOURCE_EXHAUSTED the transport could not allocate what the copy needs
 *   CANCELLED          the transport was shut down before the copy ran
 * A transport checks what it cheaply can before accepting a copy (bad
 * descriptors, ranges), so those errors normally come back from copy
 * itself; failures found while moving bytes come through |done|.
 *
 * Memory: the endpoints are borrowed. The caller keeps both backends and
 * both memories alive, and neither reads the destination range nor writes
 * either range, until |done| runs. The two ranges may lie in the same
 * memory and may overlap (the result is as if the source were copied to a
 * temporary first).
 *
 * Strided copies (v2, copy_strided): one descriptor moves a grid of rows
 * of |size| bytes (a transfer between shardings moves one such grid per
 * pair of shards, whatever the number of rows). The contract is copy's,
 * with one done for the whole grid; rows are copied in index order, each
 * as copy would. A transport without copy_strided gets one copy per row.
 */
#ifndef PATHWAYS_TRANSPORT_H_
#define PATHWAYS_TRANSPORT_H_

#include "pathways/api.h"
#include "pathways/backend.h"
#include "pathways/status.h"

PW_EXTERN_C_BEGIN

/* One side of a copy: |size| bytes at |offset| in |memory|, an allocation
 * of |backend| on its device |device|. */
typedef struct pw_transport_endpoint_t {
  const pw_backend_t* backend;  /* borrowed until done */
  uint32_t device;              /* backend device ordinal */
  pw_backend_memory_t memory;   /* borrowed until done */
  size_t offset;                /* bytes from the start of |memory| */
} pw_transport_endpoint_t;

/* Completion of one copy. Owns |status| (NULL = OK). */
typedef void (*pw_transport_done_fn_t)(void* done_user, pw_status_t status);

/* One level of a strided copy (v2): what lies inside it (the next level,
 * or the row) is repeated |count| (>= 1) times, |src_stride| bytes apart
 * in the source and |dst_stride| bytes apart in the destination. */
typedef struct pw_transport_stride_t {
  size_t count;
  size_t src_stride;
  size_t dst_stride;
} pw_transport_stride_t;

/* Levels a strided copy has at most: a box of a row-major array split
 * along one axis, intersected with one split along another, is rows
 * repeated along at most two strides. */
#define PW_TRANSPORT_MAX_STRIDES 2

/* One copy: |size| bytes from |src| to |dst|. The descriptor itself is
 * read before copy returns (the caller may reuse it at once); what it
 * points to is borrowed until done. */
typedef struct pw_transport_copy_t {
  size_t struct_size;           /* sizeof(pw_transport_copy_t) */
  pw_transport_endpoint_t src;
  pw_transport_endpoint_t dst;
  size_t size;                  /* may be 0: still range-checked, then done(OK) */
  pw_transport_done_fn_t done;
  void* done_user;
  /* Caller's id for traces and messages (e.g. a transfer node's gang id);
   * 0 if none. */
  uint64_t tag;
  /* -- v2 fields start here: read by copy_strided only -- */
  /* copy_strided moves, for every index (i_0, ..., i_{n-1}) below the
   * levels' counts (n = |stride_count| <= PW_TRANSPORT_MAX_STRIDES, outer
   * level first), the |size|-byte row at src.offset + sum(i_k *
   * strides[k].src_stride) to dst.offset + sum(i_k * strides[k].dst_stride).
   * Every row must lie inside its memory (OUT_OF_RANGE otherwise, also
   * when that arithmetic overflows); |stride_count| 0 is a plain copy. */
  uint32_t stride_count;
  pw_transport_stride_t strides[PW_TRANSPORT_MAX_STRIDES];
} pw_transport_copy_t;

/* The bytes a strided copy (|stride_count| levels of |copy|) spans from
 * its offset on each side: the last row's start plus |size|.
 * INVALID_ARGUMENT for more than PW_TRANSPORT_MAX_STRIDES levels or a
 * count of 0, OUT_OF_RANGE when the sum overflows. A transport's
 * copy_strided checks its endpoints against these. */
PW_API PW_MUST_USE_RESULT pw_status_t pw_transport_copy_extent(const pw_transport_copy_t* copy,
                                                              size_t* out_src, size_t* out_dst);

/* Steps the row index |idx| (|count| levels, outer first; all zero at the
 * first row) of a strided copy to the next row in index order, moving
 * |*src_offset| and |*dst_offset| by the levels' strides; false (offsets
 * back at the first row) after the last one. For a transport that runs a
 * strided copy row by row. */
PW_API bool pw_transport_stride_next(uint32_t count, const pw_transport_stride_t* strides,
                                     size_t* idx, size_t* src_offset, size_t* dst_offset);

#define PW_TRANSPORT_COPY_SIZE_V1 PW_STRUCT_SIZE(pw_transport_copy_t, tag)
#define PW_TRANSPORT_COPY_SIZE_V2 PW_STRUCT_SIZE(pw_transport_copy_t, strides)

typedef struct pw_transport_vtable_t {
  size_t struct_size;
  const char* name;   /* "inproc", for messages */
  uint32_t version;

  /* Frees the transport. Nothing may be in flight. */
  void (*destroy)(void* self);

  /* Starts one copy; see the async contract above. */
  pw_status_t (*copy)(void* self, const pw_transport_copy_t* copy);

  /* Optional: whether this transport can move bytes from |src_device| of
   * |src| to |dst_device| of |dst| at all (an in-process transport: any
   * two backends of this process; a network one: devices on other hosts).
   * Missing: it is assumed it can, and copy says otherwise. */
  bool (*can_copy)(void* self, const pw_backend_t* src, uint32_t src_device,
                   const pw_backend_t* dst, uint32_t dst_device);

  /* -- v2 methods start here -- */

  /* Optional: starts one strided copy (the v2 fields of |copy|; its
   * struct_size is at least PW_TRANSPORT_COPY_SIZE_V2), with copy's async
   * contract and one done for every row. Missing: the runtime issues one
   * copy per row. */
  pw_status_t (*copy_strided)(void* self, const pw_transport_copy_t* copy);
} pw_transport_vtable_t;

#define PW_TRANSPORT_VTABLE_SIZE_V1 PW_STRUCT_SIZE(pw_transport_vtable_t, can_copy)
#define PW_TRANSPORT_VTABLE_SIZE_V2 PW_STRUCT_SIZE(pw_transport_vtable_t, copy_strided)

/* A transport instance. The runtime takes ownership when it is handed one
 * (and calls vtable->destroy(self) when done with it). */
typedef struct pw_transport_t {
  const pw_transport_vtable_t* vtable;
  void* self;
} pw_transport_t;

PW_EXTERN_C_END

#endif /* PATHWAYS_TRANSPORT_H_ */
