/* Internal: checked calls into a host-plugged transport vtable.
 *
 * Every call the runtime makes into a transport goes through these, as
 * backend calls go through backend_call.h: a vtable whose struct_size is
 * too small, a NULL method, or a method beyond struct_size yields
 * UNIMPLEMENTED naming the transport and the method — never a crash. Copy
 * descriptors are checked here too, so every transport sees well-formed
 * ones and every caller gets the same errors for malformed ones. */
#ifndef PW_PLUGIN_TRANSPORT_CALL_H_
#define PW_PLUGIN_TRANSPORT_CALL_H_

#include "pathways/transport.h"

/* OK if |transport| has a vtable of at least PW_TRANSPORT_VTABLE_SIZE_V1
 * bytes and a name; INVALID_ARGUMENT naming the problem otherwise. */
pw_status_t pw__transport_check(const pw_transport_t* transport);

/* The transport's name for messages ("inproc"), "(unnamed transport)" if
 * unset. */
const char* pw__transport_name(const pw_transport_t* transport);

/* True if |method| (a field of pw_transport_vtable_t given by offset) is
 * present: inside struct_size and non-NULL. */
bool pw__transport_has(const pw_transport_t* transport, size_t method_offset,
                       size_t method_size);
#define PW__TRANSPORT_HAS(transport, method)                              \
  pw__transport_has((transport), offsetof(pw_transport_vtable_t, method), \
                    sizeof(((pw_transport_vtable_t*)0)->method))

void pw__transport_destroy(const pw_transport_t* transport);

/* Checks |copy| (struct_size, done, endpoints present, offset + size not
 * overflowing: INVALID_ARGUMENT / OUT_OF_RANGE naming the field), then
 * calls the transport's copy (UNIMPLEMENTED if it has none). The async
 * contract of transport.h holds: on error, done is never called. */
pw_status_t pw__transport_copy(const pw_transport_t* transport,
                               const pw_transport_copy_t* copy);

/* Checks |copy| as pw__transport_copy does, with its v2 fields (struct_size
 * at least PW_TRANSPORT_COPY_SIZE_V2, pw_transport_copy_extent), then calls
 * the transport's copy_strided (UNIMPLEMENTED if it has none). */
pw_status_t pw__transport_copy_strided(const pw_transport_t* transport,
                                       const pw_transport_copy_t* copy);

/* The transport's can_copy; true when it has none. */
bool pw__transport_can_copy(const pw_transport_t* transport, const pw_backend_t* src,
                            uint32_t src_device, const pw_backend_t* dst,
                            uint32_t dst_device);

#endif /* PW_PLUGIN_TRANSPORT_CALL_H_ */
