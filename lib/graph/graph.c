#define _POSIX_C_SOURCE 200809L
/* Graph builder, validation and lowering into a plan.
 *
 * Nodes are stored as added. Handles (vslices, executables) are resolved at
 * add time, so a released or foreign handle is rejected right there; the
 * structure (unknown nodes, specs against signatures, slices, cycles) is
 * checked by finalize, which then lowers the graph into a pw_plan_t kept
 * with the graph: ops in topological order with their input sources,
 * successor lists and dependency counts.
 *
 * Storage is compact, since a graph of 10^5 nodes is built at a few
 * hundred nanoseconds per node and fresh pages cost more than the work: a
 * node is 40 bytes; its inputs live in arrays shared by all nodes, what
 * only parameters and transfers have (specs, the destination sharding) in
 * side arrays, and names are pointers (an executable's own name, a
 * literal, or a copy in the graph's name chunks). Nodes and inputs are
 * kept in fixed-size chunks that never move: a growing array would copy
 * everything on each doubling and touch twice the memory. The plan is one
 * block. */
#include <stdio.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "runtime/objects.h"

typedef enum pw_graph_node_kind_e {
  PW_GRAPH_NODE_PARAMETER = 1,
  PW_GRAPH_NODE_COMPUTE = 2,
  PW_GRAPH_NODE_TRANSFER = 3,
} pw_graph_node_kind_t;

/* Compute and transfer nodes become ops of the plan. */
static bool pw_graph_is_op(pw_graph_node_kind_t kind) {
  return kind == PW_GRAPH_NODE_COMPUTE || kind == PW_GRAPH_NODE_TRANSFER;
}

typedef struct pw_graph_node_s {
  pw_graph_node_kind_t kind;
  uint32_t input_count;
  uint32_t input_start;             /* first input (pw_graph_inputs) */
  uint32_t extra;                   /* parameter: its index; transfer: its
                                       entry in pw_graph_obj_t.transfers */
  const char* name;                 /* NUL-terminated, at most 63 bytes;
                                       lives as long as the graph */
  pw_vslice_obj_t* vslice;          /* held by the graph */
  pw_executable_obj_t* executable;  /* held by the graph (compute) */
} pw_graph_node_t;

/* What a transfer node has beyond a node. */
typedef struct pw_graph_transfer_s {
  const pw_array_spec_t* spec;      /* resolved output (at finalize), in
                                       pw_graph_obj_t.specs; NULL before */
  pw_sharding_t sharding;           /* the destination sharding */
} pw_graph_transfer_t;

/* The copies of the last transfer lowered, for the next one that moves
 * the same specs between the same meshes (a pipeline's transfers mostly
 * do) to share: they live in the plan's arena and are only read. */
typedef struct pw_graph_copy_memo_s {
  const pw_array_spec_t* src;
  const pw_array_spec_t* dst;
  pw_mesh_shape_t src_mesh;
  pw_mesh_shape_t dst_mesh;
  pw_plan_copy_t* copies;
  uint32_t copy_count;
  uint32_t* copy_start;
} pw_graph_copy_memo_t;

/* Names that are not an executable's own or a literal are copied into
 * chunks that live as long as the graph. */
typedef struct pw_graph_name_chunk_s {
  struct pw_graph_name_chunk_s* next;
  uint32_t size;                    /* bytes of text[] */
  uint32_t used;
  char text[];
} pw_graph_name_chunk_t;

#define PW_GRAPH_NAME_CHUNK_BYTES 4096u

/* Fixed-size chunks of nodes or inputs, indexed by a directory. */
typedef struct pw_graph_chunks_s {
  void** chunks;                    /* |embedded| until it outgrows it */
  uint32_t count;
  uint32_t capacity;                /* of |chunks| */
  void* embedded[4];
} pw_graph_chunks_t;

#define PW_GRAPH_NODE_SHIFT 10u     /* 1024 nodes (40 KiB) a chunk */
#define PW_GRAPH_NODE_CHUNK (1u << PW_GRAPH_NODE_SHIFT)
#define PW_GRAPH_INPUT_SHIFT 12u    /* 4096 inputs (32 KiB) a chunk */
#define PW_GRAPH_INPUT_CHUNK (1u << PW_GRAPH_INPUT_SHIFT)
#define PW_GRAPH_TRANSFER_SHIFT 8u  /* 256 transfers (27 KiB) a chunk */
#define PW_GRAPH_TRANSFER_CHUNK (1u << PW_GRAPH_TRANSFER_SHIFT)
#define PW_GRAPH_SPEC_CHUNK 64u     /* specs (6 KiB) a chunk */
#define PW_GRAPH_NAME_MAX 63u       /* longer names are truncated */

typedef struct pw_graph_obj_s {
  /* Every submission retains and releases the graph: its own cache line
   * (the object is allocated aligned), so that threads submitting their
   * own graphs do not false-share neighbouring objects' counts. */
  _Alignas(PW_CACHE_LINE) pw_object_t header;
  pthread_mutex_t lock;
  pw_graph_chunks_t nodes;          /* of PW_GRAPH_NODE_CHUNK nodes */
  uint32_t node_count;
  /* Every node's inputs, in node order; a node's are contiguous, in one
   * chunk: |input_end| skips a chunk's tail that cannot hold them. */
  pw_graph_chunks_t inputs;         /* of PW_GRAPH_INPUT_CHUNK values */
  uint32_t input_count;             /* inputs of all nodes */
  uint32_t input_end;               /* next free input index */
  pw_array_spec_t* param_specs;     /* param_count */
  uint32_t param_capacity;
  pw_graph_chunks_t transfers;      /* of PW_GRAPH_TRANSFER_CHUNK */
  uint32_t transfer_count;
  /* Transfers' resolved output specs; consecutive equal ones are stored
   * once (|last_spec|). */
  pw_graph_chunks_t specs;          /* of PW_GRAPH_SPEC_CHUNK */
  uint32_t spec_count;
  const pw_array_spec_t* last_spec;
  pw_graph_copy_memo_t copy_memo;   /* lowering only */
  pw_graph_name_chunk_t* names;     /* newest first */
  /* The references that keep the vslices and executables of the nodes
   * alive (nodes borrow them): one per object and stay in |held_recent|
   * (direct-mapped by address), so consecutive adds naming the same
   * objects take no reference. */
  pw_object_t** held;               /* |held_embedded| until it outgrows it */
  uint32_t held_count;
  uint32_t held_capacity;
  pw_object_t* held_recent[16];
  pw_object_t* held_embedded[4];
  pw_value_t* outputs;
  uint32_t output_count;
  uint32_t output_capacity;
  uint32_t param_count;
  bool finalized;
  /* Set (release) once |plan| is built, and never cleared: submitters read
   * the plan without taking |lock|. */
  pw_atomic_u32_t planned;
  pw_plan_t plan;
} pw_graph_obj_t;

#define PW_GRAPH_MAX_NODES (1u << 24)
#define PW_GRAPH_MAX_INPUTS (PW_GRAPH_MAX_NODES * 4u)

static inline pw_graph_node_t* pw_graph_node_at(const pw_graph_obj_t* g, uint32_t id) {
  return (pw_graph_node_t*)g->nodes.chunks[id >> PW_GRAPH_NODE_SHIFT] +
         (id & (PW_GRAPH_NODE_CHUNK - 1));
}

static inline pw_graph_transfer_t* pw_graph_transfer_at(const pw_graph_obj_t* g, uint32_t i) {
  return (pw_graph_transfer_t*)g->transfers.chunks[i >> PW_GRAPH_TRANSFER_SHIFT] +
         (i & (PW_GRAPH_TRANSFER_CHUNK - 1));
}

static inline const pw_value_t* pw_graph_inputs(const pw_graph_obj_t* g,
                                                const pw_graph_node_t* n) {
  if (n->input_count == 0) return NULL;
  return (const pw_value_t*)g->inputs.chunks[n->input_start >> PW_GRAPH_INPUT_SHIFT] +
         (n->input_start & (PW_GRAPH_INPUT_CHUNK - 1));
}

/* The output spec of a parameter or transfer node (a zero spec for a
 * transfer before finalize resolves it). */
static const pw_array_spec_t* pw_graph_node_spec(const pw_graph_obj_t* g,
                                                 const pw_graph_node_t* n) {
  static const pw_array_spec_t unresolved;
  if (n->kind == PW_GRAPH_NODE_PARAMETER) return &g->param_specs[n->extra];
  const pw_array_spec_t* spec = pw_graph_transfer_at(g, n->extra)->spec;
  return spec ? spec : &unresolved;
}

static void pw_graph_chunks_free(pw_allocator_t a, pw_graph_chunks_t* c, size_t chunk_bytes) {
  for (uint32_t i = 0; i < c->count; ++i) pw_allocator_free(a, c->chunks[i], chunk_bytes);
  if (c->chunks != c->embedded) pw_allocator_free(a, c->chunks, c->capacity * sizeof(void*));
}

/* ---- the plan's copy arena ----------------------------------------------
 * Transfer ops' copies and copy_start come from chunks the plan owns
 * (pw_plan_t.copy_arena), handed to pw__reshard_plan as an allocator: a
 * pipeline has a transfer per stage and microbatch, and two mallocs each
 * cost more than the rest of its lowering. Freeing the newest block gives
 * it back; other frees (error paths only) wait for the plan to go. */
typedef struct pw_plan_arena_chunk_s {
  struct pw_plan_arena_chunk_s* prev;
  size_t size;                      /* of the whole chunk */
  size_t used;                      /* from the chunk's start */
  size_t last;                      /* offset of the newest block */
} pw_plan_arena_chunk_t;

#define PW_PLAN_ARENA_CHUNK 16384u

typedef struct pw_plan_arena_s {
  pw_allocator_t parent;
  pw_plan_t* plan;
} pw_plan_arena_t;

static void* pw_plan_arena_alloc(void* self, size_t size, size_t alignment) {
  pw_plan_arena_t* arena = self;
  pw_plan_arena_chunk_t* c = arena->plan->copy_arena;
  size_t header = (sizeof(*c) + 15) & ~(size_t)15;
  size_t at = c ? (c->used + alignment - 1) & ~(alignment - 1) : 0;
  if (c == NULL || at + size > c->size || at + size < at) {
    size_t want = header + alignment + size;
    if (want < size) return NULL;
    size_t chunk = want > PW_PLAN_ARENA_CHUNK ? want : PW_PLAN_ARENA_CHUNK;
    pw_plan_arena_chunk_t* fresh = arena->parent.alloc(arena->parent.self, chunk, 16);
    if (fresh == NULL) return NULL;
    fresh->prev = c;
    fresh->size = chunk;
    fresh->used = header;
    arena->plan->copy_arena = fresh;
    c = fresh;
    at = (c->used + alignment - 1) & ~(alignment - 1);
  }
  c->last = at;
  c->used = at + size;
  return (unsigned char*)c + at;
}

static void pw_plan_arena_free(void* self, void* ptr, size_t size) {
  (void)size;
  pw_plan_arena_t* arena = self;
  pw_plan_arena_chunk_t* c = arena->plan->copy_arena;
  if (c != NULL && ptr == (unsigned char*)c + c->last) c->used = c->last;
}

static void pw_plan_free(pw_runtime_t* rt, pw_plan_t* plan) {
  pw_allocator_t a = rt->allocator;
  for (pw_plan_arena_chunk_t* c = plan->copy_arena; c != NULL;) {
    pw_plan_arena_chunk_t* prev = c->prev;
    pw_allocator_free(a, c, c->size);
    c = prev;
  }
  if (plan->storage) pw_allocator_free(a, plan->storage, plan->storage_size);
  pw__plan_release_dispatch(plan);
  memset(plan, 0, sizeof(*plan));
}

static void pw_graph_destroy(pw_object_t* object) {
  pw_graph_obj_t* g = (pw_graph_obj_t*)object;
  pw_runtime_t* rt = object->runtime;
  pw_allocator_t a = rt->allocator;
  pw_plan_free(rt, &g->plan);
  for (uint32_t i = 0; i < g->held_count; ++i) pw__object_release(g->held[i]);
  if (g->held != g->held_embedded) {
    pw_allocator_free(a, g->held, g->held_capacity * sizeof(pw_object_t*));
  }
  pw_graph_chunks_free(a, &g->nodes, PW_GRAPH_NODE_CHUNK * sizeof(pw_graph_node_t));
  pw_graph_chunks_free(a, &g->inputs, PW_GRAPH_INPUT_CHUNK * sizeof(pw_value_t));
  pw_allocator_free(a, g->param_specs, g->param_capacity * sizeof(pw_array_spec_t));
  pw_graph_chunks_free(a, &g->transfers, PW_GRAPH_TRANSFER_CHUNK * sizeof(pw_graph_transfer_t));
  pw_graph_chunks_free(a, &g->specs, PW_GRAPH_SPEC_CHUNK * sizeof(pw_array_spec_t));
  for (pw_graph_name_chunk_t* c = g->names; c != NULL;) {
    pw_graph_name_chunk_t* next = c->next;
    pw_allocator_free(a, c, sizeof(*c) + c->size);
    c = next;
  }
  pw_allocator_free(a, g->outputs, g->output_capacity * sizeof(pw_value_t));
  pthread_mutex_destroy(&g->lock);
  pw_allocator_free(a, g, sizeof(*g));
}

pw_status_t pw_graph_create(pw_client_t* client, pw_graph_t* out_graph) {
  if (client == NULL || out_graph == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_create: client or out_graph is NULL");
  }
  out_graph->id = 0;
  pw_runtime_t* rt = client->runtime;
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(rt->allocator, sizeof(*g), PW_CACHE_LINE, (void**)&g));
  pw__object_init(&g->header, PW_OBJECT_GRAPH, rt, pw_graph_destroy);
  pthread_mutex_init(&g->lock, NULL);
  return pw__handle_insert(client, &g->header, &out_graph->id);
}

static pw_status_t pw_graph_get(pw_client_t* client, pw_graph_t graph,
                                pw_graph_obj_t** out) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_lookup(client, graph.id, PW_OBJECT_GRAPH, "graph", (pw_object_t**)out);
}

/* Grows |*array| (of |*capacity| elements of |size|, |count| used) to hold
 * |more| more, doubling; at most |max| elements. An array that is
 * |embedded| (storage inside the graph; may be NULL) is not freed. */
static pw_status_t pw_graph_reserve_embedded(pw_runtime_t* rt, void** array, uint32_t* capacity,
                                             uint32_t count, uint32_t more, size_t size,
                                             uint32_t max, const void* embedded) {
  if (more <= *capacity - count) return NULL;
  if (more > max - count) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                          "graph already has %u entries (maximum %u)", count, max);
  }
  uint32_t next = *capacity ? *capacity : 8;
  while (next - count < more) next = next > max / 2 ? max : next * 2;
  void* grown = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(rt->allocator, next * size, 0, &grown));
  if (count) memcpy(grown, *array, count * size);
  if (*array != embedded) pw_allocator_free(rt->allocator, *array, *capacity * size);
  *array = grown;
  *capacity = next;
  return NULL;
}

static pw_status_t pw_graph_reserve(pw_runtime_t* rt, void** array, uint32_t* capacity,
                                    uint32_t count, uint32_t more, size_t size, uint32_t max) {
  return pw_graph_reserve_embedded(rt, array, capacity, count, more, size, max, NULL);
}

/* Adds a chunk of |chunk_bytes| to |c|. */
static pw_status_t pw_graph_chunks_add(pw_runtime_t* rt, pw_graph_chunks_t* c,
                                       size_t chunk_bytes) {
  if (c->chunks == NULL) {
    c->chunks = c->embedded;
    c->capacity = sizeof(c->embedded) / sizeof(c->embedded[0]);
  }
  PW_RETURN_IF_ERROR(pw_graph_reserve_embedded(rt, (void**)&c->chunks, &c->capacity, c->count, 1,
                                               sizeof(void*), PW_GRAPH_MAX_INPUTS, c->embedded));
  void* chunk = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(rt->allocator, chunk_bytes, 0, &chunk));
  c->chunks[c->count++] = chunk;
  return NULL;
}

/* Copies |name| (truncated to PW_GRAPH_NAME_MAX bytes) into |g|'s name
 * chunks. */
static pw_status_t pw_graph_copy_name(pw_graph_obj_t* g, const char* name,
                                      const char** out_name) {
  size_t n = strnlen(name, PW_GRAPH_NAME_MAX);
  pw_graph_name_chunk_t* c = g->names;
  if (c == NULL || c->size - c->used < n + 1) {
    uint32_t size = PW_GRAPH_NAME_CHUNK_BYTES - (uint32_t)sizeof(*c);
    PW_RETURN_IF_ERROR(
        pw_allocator_malloc(g->header.runtime->allocator, sizeof(*c) + size, 0, (void**)&c));
    c->next = g->names;
    c->size = size;
    c->used = 0;
    g->names = c;
  }
  char* dst = c->text + c->used;
  memcpy(dst, name, n);
  dst[n] = '\0';
  c->used += (uint32_t)n + 1;
  *out_name = dst;
  return NULL;
}

/* Locks |g| for a modification; fails if it is already finalized. */
static pw_status_t pw_graph_begin_edit(pw_graph_obj_t* g, const char* what) {
  pthread_mutex_lock(&g->lock);
  if (g->finalized) {
    pthread_mutex_unlock(&g->lock);
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "%s: the graph is finalized (it was submitted or "
                          "pw_graph_finalize was called); build a new graph",
                          what);
  }
  return NULL;
}

/* What an add call appends: |node| (kind, vslice, executable, and name
 * unless |copy_name| is set), |inputs|, and the parameter's spec or the
 * transfer's sharding. */
typedef struct pw_graph_addition_s {
  pw_graph_node_t node;
  const char* copy_name;            /* a caller's string to copy */
  const pw_value_t* inputs;
  const pw_array_spec_t* spec;      /* parameter */
  pw_sharding_t sharding;           /* transfer */
} pw_graph_addition_t;

/* Appends |add| to |g| (locked, not finalized): nothing changes on failure.
 * Parameters get the next parameter index and a default name. */
static pw_status_t pw_graph_append_locked(pw_graph_obj_t* g, pw_graph_addition_t* add,
                                          uint32_t* out_node) {
  pw_runtime_t* rt = g->header.runtime;
  pw_graph_node_t* node = &add->node;
  pw_status_t status = NULL;
  if (g->node_count >= PW_GRAPH_MAX_NODES) {
    status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                            "graph already has %u entries (maximum %u)", g->node_count,
                            PW_GRAPH_MAX_NODES);
  } else if (g->node_count == g->nodes.count << PW_GRAPH_NODE_SHIFT) {
    status = pw_graph_chunks_add(rt, &g->nodes, PW_GRAPH_NODE_CHUNK * sizeof(pw_graph_node_t));
  }
  uint32_t input_start = g->input_end;
  if (status == NULL && node->input_count) {
    if (input_start >> PW_GRAPH_INPUT_SHIFT >= g->inputs.count ||
        (input_start & (PW_GRAPH_INPUT_CHUNK - 1)) + node->input_count > PW_GRAPH_INPUT_CHUNK) {
      if (g->inputs.count >= PW_GRAPH_MAX_INPUTS / PW_GRAPH_INPUT_CHUNK) {
        status = pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED,
                                "graph already has %u inputs (maximum %u)", g->input_count,
                                PW_GRAPH_MAX_INPUTS);
      } else {
        input_start = g->inputs.count << PW_GRAPH_INPUT_SHIFT;
        status = pw_graph_chunks_add(rt, &g->inputs, PW_GRAPH_INPUT_CHUNK * sizeof(pw_value_t));
      }
    }
  }
  if (status == NULL && node->kind == PW_GRAPH_NODE_PARAMETER) {
    status = pw_graph_reserve(rt, (void**)&g->param_specs, &g->param_capacity, g->param_count,
                              1, sizeof(pw_array_spec_t), PW_GRAPH_MAX_NODES);
    if (status == NULL) {
      char name[32];
      snprintf(name, sizeof(name), "param%u", g->param_count);
      status = pw_graph_copy_name(g, name, &node->name);
    }
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_TRANSFER) {
    if (g->transfer_count == g->transfers.count << PW_GRAPH_TRANSFER_SHIFT) {
      status = pw_graph_chunks_add(rt, &g->transfers,
                                   PW_GRAPH_TRANSFER_CHUNK * sizeof(pw_graph_transfer_t));
    }
  }
  if (status == NULL && add->copy_name != NULL) {
    status = pw_graph_copy_name(g, add->copy_name, &node->name);
  }
  if (status == NULL) {
    if (node->kind == PW_GRAPH_NODE_PARAMETER) {
      node->extra = g->param_count;
      g->param_specs[g->param_count++] = *add->spec;
    } else if (node->kind == PW_GRAPH_NODE_TRANSFER) {
      node->extra = g->transfer_count;
      pw_graph_transfer_t* t = pw_graph_transfer_at(g, g->transfer_count++);
      t->spec = NULL;
      t->sharding = add->sharding;
    }
    node->input_start = input_start;
    if (node->input_count) {
      memcpy((pw_value_t*)pw_graph_inputs(g, node), add->inputs,
             node->input_count * sizeof(pw_value_t));
      g->input_count += node->input_count;
      g->input_end = input_start + node->input_count;
    }
    *pw_graph_node_at(g, g->node_count) = *node;
    if (out_node) *out_node = g->node_count;
    g->node_count++;
  }
  return status;
}

/* Makes |g| hold a reference to |object| (for its nodes to borrow), unless
 * it recently did. Called with the client's handle read lock held, which
 * keeps |object| alive until the reference is taken. */
static pw_status_t pw_graph_hold(pw_graph_obj_t* g, pw_object_t* object) {
  /* Fibonacci hashing: objects of one kind sit at a common stride, which
   * low address bits alone would map to a few slots. */
  uint64_t h = (uint64_t)(uintptr_t)object * UINT64_C(0x9E3779B97F4A7C15);
  pw_object_t** recent = &g->held_recent[h >> 60];
  if (*recent == object) return NULL;
  if (g->held == NULL) {
    g->held = g->held_embedded;
    g->held_capacity = sizeof(g->held_embedded) / sizeof(g->held_embedded[0]);
  }
  PW_RETURN_IF_ERROR(pw_graph_reserve_embedded(g->header.runtime, (void**)&g->held,
                                               &g->held_capacity, g->held_count, 1,
                                               sizeof(pw_object_t*), PW_GRAPH_MAX_NODES * 2,
                                               g->held_embedded));
  pw__object_retain(object);
  g->held[g->held_count++] = object;
  *recent = object;
  return NULL;
}

/* Resolves |vslice_id| (and |*executable_id| unless NULL) of |client| into
 * |node|, in one section of the handle table's read lock, and makes |g|
 * hold them. Called with g->lock held. */
static pw_status_t pw_graph_resolve(pw_client_t* client, pw_graph_obj_t* g, uint64_t vslice_id,
                                    const uint64_t* executable_id, pw_graph_node_t* node) {
  pw_handle_table_t* table = &client->handles;
  uint32_t stripe = pw__handle_read_lock(table);
  pw_object_t* vs = NULL;
  pw_object_t* exe = NULL;
  pw_status_t status = pw__handle_peek(client, vslice_id, PW_OBJECT_VSLICE, "vslice", &vs);
  if (status == NULL && executable_id != NULL) {
    status = pw__handle_peek(client, *executable_id, PW_OBJECT_EXECUTABLE, "executable", &exe);
  }
  if (status == NULL) status = pw_graph_hold(g, vs);
  if (status == NULL && exe != NULL) status = pw_graph_hold(g, exe);
  pw__handle_read_unlock(table, stripe);
  if (status == NULL) {
    node->vslice = (pw_vslice_obj_t*)vs;
    node->executable = (pw_executable_obj_t*)exe;
  }
  return status;
}

/* Common body of the add functions: under |g|'s lock, resolves the node's
 * handles, checks what needs them, and appends. Releases |g| (from
 * pw_graph_get). Objects a failed add resolved may stay held by the graph
 * until it goes. */
static pw_status_t pw_graph_add_node(pw_client_t* client, pw_graph_obj_t* g, const char* what,
                                     pw_graph_addition_t* add, uint64_t vslice_id,
                                     const uint64_t* executable_id, const char* name,
                                     uint32_t* out_node) {
  pthread_mutex_lock(&g->lock);
  pw_graph_node_t* node = &add->node;
  pw_status_t status = pw_graph_resolve(client, g, vslice_id, executable_id, node);
  if (status != NULL) status = pw_status_annotate(status, "%s", what);
  if (status == NULL && node->kind == PW_GRAPH_NODE_PARAMETER) {
    status = pw_array_spec_check(add->spec, &node->vslice->mesh);
    if (status) status = pw_status_annotate(status, "parameter %u", g->param_count);
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_COMPUTE) {
    /* The executable's own name lives as long as the graph holds it; a
     * caller's string, or a name that fills its array, is copied. */
    const char* own = node->executable->signature.name;
    if (name && name[0]) {
      add->copy_name = name;
    } else if (memchr(own, '\0', PW_GRAPH_NAME_MAX + 1) != NULL) {
      node->name = own;
    } else {
      add->copy_name = own;
    }
  } else if (status == NULL && node->kind == PW_GRAPH_NODE_TRANSFER &&
             add->sharding.kind != PW_SHARDING_REPLICATED &&
             add->sharding.kind != PW_SHARDING_SPLIT) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "pw_graph_add_transfer: unknown sharding kind %d",
                            (int)add->sharding.kind);
  }
  if (status == NULL && g->finalized) {
    status = pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                            "%s: the graph is finalized (it was submitted or "
                            "pw_graph_finalize was called); build a new graph",
                            what);
  }
  if (status == NULL) status = pw_graph_append_locked(g, add, out_node);
  pthread_mutex_unlock(&g->lock);
  pw__object_release(&g->header);
  return status;
}

pw_status_t pw_graph_add_parameter(pw_client_t* client, pw_graph_t graph,
                                   pw_vslice_t vslice, const pw_array_spec_t* spec,
                                   uint32_t* out_node) {
  if (spec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_add_parameter: spec is NULL");
  }
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_addition_t add;
  memset(&add, 0, sizeof(add));
  add.node.kind = PW_GRAPH_NODE_PARAMETER;
  add.spec = spec;
  return pw_graph_add_node(client, g, "pw_graph_add_parameter", &add, vslice.id, NULL, NULL,
                           out_node);
}

pw_status_t pw_graph_add_compute(pw_client_t* client, pw_graph_t graph, const char* name,
                                 pw_executable_t executable, pw_vslice_t vslice,
                                 const pw_value_t* inputs, uint32_t input_count,
                                 uint32_t* out_node) {
  if (input_count > PW_BACKEND_MAX_PARAMS) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "pw_graph_add_compute: %u inputs (maximum %d)", input_count,
                          PW_BACKEND_MAX_PARAMS);
  }
  if (input_count > 0 && inputs == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_add_compute: inputs is NULL");
  }
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_addition_t add;
  add.node.kind = PW_GRAPH_NODE_COMPUTE;
  add.node.input_count = input_count;
  add.node.name = NULL;
  add.copy_name = NULL;
  add.inputs = inputs;
  return pw_graph_add_node(client, g, "pw_graph_add_compute", &add, vslice.id, &executable.id,
                           name, out_node);
}

pw_status_t pw_graph_add_transfer(pw_client_t* client, pw_graph_t graph, const char* name,
                                  pw_value_t input, pw_vslice_t vslice,
                                  pw_sharding_t sharding, uint32_t* out_node) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_graph_addition_t add;
  memset(&add, 0, sizeof(add));
  add.node.kind = PW_GRAPH_NODE_TRANSFER;
  add.node.input_count = 1;
  add.inputs = &input;
  add.sharding = sharding;
  if (name && name[0]) {
    add.copy_name = name;
  } else {
    add.node.name = "transfer";
  }
  return pw_graph_add_node(client, g, "pw_graph_add_transfer", &add, vslice.id, NULL, NULL,
                           out_node);
}

pw_status_t pw_graph_add_output(pw_client_t* client, pw_graph_t graph, pw_value_t value) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pw_status_t status = pw_graph_begin_edit(g, "pw_graph_add_output");
  if (status == NULL) {
    status = pw_graph_reserve(g->header.runtime, (void**)&g->outputs, &g->output_capacity,
                              g->output_count, 1, sizeof(pw_value_t), PW_GRAPH_MAX_NODES);
    if (status == NULL) g->outputs[g->output_count++] = value;
    pthread_mutex_unlock(&g->lock);
  }
  pw__object_release(&g->header);
  return status;
}

/* ---- validation --------------------------------------------------------- */

/* The label of an error: |what|, followed by |index| unless it is
 * UINT32_MAX ("input 2"). Formatted only when there is an error. */
static void pw_graph_label(char* buf, size_t size, const char* what, uint32_t index) {
  if (index == UINT32_MAX) {
    snprintf(buf, size, "%s", what);
  } else {
    snprintf(buf, size, "%s %u", what, index);
  }
}

/* The spec and physical slice of |value|, or an error naming |what| (and
 * |index|, see pw_graph_label). */
static pw_status_t pw_graph_value_spec(const pw_graph_obj_t* g, pw_value_t value,
                                       const char* what, uint32_t index,
                                       const pw_array_spec_t** out_spec,
                                       const pw_vslice_obj_t** out_vslice) {
  char label[48];
  if (value.node >= g->node_count) {
    pw_graph_label(label, sizeof(label), what, index);
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%s: refers to node %u, which does not exist (%u nodes)", label,
                          value.node, g->node_count);
  }
  const pw_graph_node_t* src = pw_graph_node_at(g, value.node);
  if (src->kind == PW_GRAPH_NODE_PARAMETER) {
    if (value.output != 0) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of parameter node %u, which has "
                            "only output 0",
                            label, value.output, value.node);
    }
    *out_spec = &g->param_specs[src->extra];
  } else if (src->kind == PW_GRAPH_NODE_TRANSFER) {
    if (value.output != 0) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of transfer node %u (\"%s\"), which has "
                            "only output 0",
                            label, value.output, value.node, src->name);
    }
    *out_spec = pw_graph_node_spec(g, src);
  } else {
    const pw_executable_signature_t* sig = &src->executable->signature;
    if (value.output >= sig->output_count) {
      pw_graph_label(label, sizeof(label), what, index);
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: refers to output %u of node %u (\"%s\"), which has %u "
                            "outputs",
                            label, value.output, value.node, src->name, sig->output_count);
    }
    *out_spec = &sig->outputs[value.output];
  }
  *out_vslice = src->vslice;
  return NULL;
}

/* Checks compute node |id| against its executable. |*checked| is the
 * (executable, vslice) pair last found compatible: consecutive nodes
 * usually share it, and then its checks are not repeated. */
static pw_status_t pw_graph_check_compute(const pw_graph_obj_t* g, uint32_t id,
                                          const void* checked[2]) {
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  const pw_executable_signature_t* sig = &n->executable->signature;
  if (checked[0] != n->executable || checked[1] != n->vslice) {
    if (n->executable->backend != n->vslice->slice->backend) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "executable '%s' was compiled for another backend than the "
                            "one of slice '%s'",
                            sig->name, n->vslice->slice->name);
    }
    if (!pw_mesh_shape_equal(&sig->mesh, &n->vslice->mesh)) {
      char a[32], b[32];
      pw_mesh_shape_format(&sig->mesh, a, sizeof(a));
      pw_mesh_shape_format(&n->vslice->mesh, b, sizeof(b));
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "executable '%s' is compiled for mesh %s, the node's virtual "
                            "slice has mesh %s",
                            sig->name, a, b);
    }
    checked[0] = n->executable;
    checked[1] = n->vslice;
  }
  if (n->input_count != sig->input_count) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                          "%u inputs given, executable '%s' takes %u", n->input_count,
                          sig->name, sig->input_count);
  }
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  for (uint32_t i = 0; i < n->input_count; ++i) {
    const pw_array_spec_t* spec = NULL;
    const pw_vslice_obj_t* src_vslice = NULL;
    PW_RETURN_IF_ERROR(pw_graph_value_spec(g, inputs[i], "input", i, &spec, &src_vslice));
    if (src_vslice != n->vslice &&
        (src_vslice->slice != n->vslice->slice ||
         !pw_mesh_shape_equal(&src_vslice->mesh, &n->vslice->mesh))) {
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u lives on slice '%s', the node runs on slice '%s' "
                            "(moving data between slices needs a transfer node)",
                            i, src_vslice->slice->name, n->vslice->slice->name);
    }
    if (!pw_array_spec_equal(spec, &sig->inputs[i])) {
      char have[160], want[160];
      pw_array_spec_format(spec, have, sizeof(have));
      pw_array_spec_format(&sig->inputs[i], want, sizeof(want));
      const char* what_differs =
          spec->dtype != sig->inputs[i].dtype                     ? "dtype"
          : !pw_shape_equal(&spec->shape, &sig->inputs[i].shape)  ? "shape"
                                                                  : "sharding";
      return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "input %u %s mismatch: has %s, executable '%s' expects %s", i,
                            what_differs, have, sig->name, want);
    }
  }
  return NULL;
}

/* A binary min-heap of node ids: the ready nodes of the topological sort.
 * Taking the smallest ready id first makes the plan follow the order in
 * which nodes were added wherever dependencies allow, so a caller controls
 * the order ops enter each slice sequence (e.g. a pipeline schedule) by
 * the order it adds them. */
static void pw_heap_push(uint32_t* heap, uint32_t* n, uint32_t id) {
  uint32_t i = (*n)++;
  while (i > 0 && heap[(i - 1) / 2] > id) {
    heap[i] = heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  heap[i] = id;
}

static uint32_t pw_heap_pop(uint32_t* heap, uint32_t* n) {
  uint32_t top = heap[0], last = heap[--(*n)], i = 0;
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= *n) break;
    if (child + 1 < *n && heap[child + 1] < heap[child]) ++child;
    if (heap[child] >= last) break;
    heap[i] = heap[child];
    i = child;
  }
  if (*n > 0) heap[i] = last;
  return top;
}

/* Resolves a transfer node's output spec (its input's dtype and shape,
 * the destination sharding over the destination mesh). */
static pw_status_t pw_graph_resolve_transfer(pw_graph_obj_t* g, uint32_t id) {
  pw_graph_node_t* n = pw_graph_node_at(g, id);
  pw_graph_transfer_t* t = pw_graph_transfer_at(g, n->extra);
  const pw_array_spec_t* in = NULL;
  const pw_vslice_obj_t* src_vslice = NULL;
  PW_RETURN_IF_ERROR(
      pw_graph_value_spec(g, pw_graph_inputs(g, n)[0], "input", UINT32_MAX, &in, &src_vslice));
  pw_array_spec_t spec = *in;
  spec.sharding = t->sharding;
  PW_RETURN_IF_ERROR_CTX(pw_sharding_check(&spec.sharding, &spec.shape, &n->vslice->mesh),
                         "destination sharding on slice '%s'", n->vslice->slice->name);
  if (g->last_spec == NULL || !pw_array_spec_equal(g->last_spec, &spec)) {
    if (g->spec_count == g->specs.count * PW_GRAPH_SPEC_CHUNK) {
      PW_RETURN_IF_ERROR(pw_graph_chunks_add(g->header.runtime, &g->specs,
                                             PW_GRAPH_SPEC_CHUNK * sizeof(pw_array_spec_t)));
    }
    pw_array_spec_t* stored = (pw_array_spec_t*)g->specs.chunks[g->spec_count / PW_GRAPH_SPEC_CHUNK] +
                              g->spec_count % PW_GRAPH_SPEC_CHUNK;
    g->spec_count++;
    *stored = spec;
    g->last_spec = stored;
  }
  t->spec = g->last_spec;
  return NULL;
}

/* The first input of |n| fed by an op node still in a cycle (indegree not
 * 0), or UINT32_MAX. */
static uint32_t pw_graph_cycle_step(const pw_graph_obj_t* g, const pw_graph_node_t* n,
                                    const uint32_t* indegree) {
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  for (uint32_t k = 0; k < n->input_count; ++k) {
    uint32_t p = inputs[k].node;
    if (pw_graph_is_op(pw_graph_node_at(g, p)->kind) && indegree[p] != 0) return p;
  }
  return UINT32_MAX;
}

/* Describes a cycle among the compute nodes left with unresolved inputs
 * after the topological sort: walks producer links from one of them until
 * a node repeats. */
static pw_status_t pw_graph_cycle_error(const pw_graph_obj_t* g, const uint32_t* indegree) {
  uint32_t start = 0;
  while (indegree[start] == 0) ++start;
  /* Walk at most node_count steps; remember the step at which each node was
   * visited to cut the path at the repeat. Reuse a small fixed text. */
  char path[512];
  size_t len = 0;
  uint32_t cur = start;
  uint32_t steps = 0;
  uint32_t seen_at_start = UINT32_MAX;
  /* First find a node that is certainly on the cycle: walk node_count steps. */
  for (uint32_t i = 0; i < g->node_count; ++i) {
    uint32_t p = pw_graph_cycle_step(g, pw_graph_node_at(g, cur), indegree);
    if (p != UINT32_MAX) cur = p;
  }
  seen_at_start = cur;
  do {
    const pw_graph_node_t* n = pw_graph_node_at(g, cur);
    int w = snprintf(path + len, sizeof(path) - len, "%s%u (\"%s\")", steps ? " <- " : "",
                     cur, n->name);
    if (w > 0) len = len + (size_t)w < sizeof(path) ? len + (size_t)w : sizeof(path) - 1;
    uint32_t p = pw_graph_cycle_step(g, n, indegree);
    if (p != UINT32_MAX) cur = p;
    ++steps;
  } while (cur != seen_at_start && steps < g->node_count);
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "graph has a cycle: node %s <- node %u", path, seen_at_start);
}

/* Byte offset of an array of |count| elements of |size| placed at |*at|
 * (aligned to |align|), which it then advances. */
static size_t pw_graph_place(size_t* at, size_t count, size_t size, size_t align) {
  size_t offset = (*at + align - 1) & ~(align - 1);
  *at = offset + count * size;
  return offset;
}

/* Allocates the plan's one block (pw_plan_t.storage): ops, their inputs
 * and successors (|*out_inputs|, |*out_successors|: as many as the graph
 * has inputs), outputs, parameter specs (copied) and vslices. Every op
 * node becomes an op and every input an op input, so the sizes are known
 * before lowering. Arrays get at least one element so that empty graphs
 * need no special case. */
static pw_status_t pw_graph_plan_alloc(pw_graph_obj_t* g, pw_plan_input_t** out_inputs,
                                       uint32_t** out_successors) {
  pw_plan_t* plan = &g->plan;
  uint32_t computes = g->node_count - g->param_count;
  size_t size = 0;
  size_t ops_at = pw_graph_place(&size, computes ? computes : 1, sizeof(pw_plan_op_t),
                                 _Alignof(pw_plan_op_t));
  size_t inputs_at = pw_graph_place(&size, g->input_count, sizeof(pw_plan_input_t),
                                    _Alignof(pw_plan_input_t));
  size_t succ_at = pw_graph_place(&size, g->input_count, sizeof(uint32_t), _Alignof(uint32_t));
  size_t outputs_at = pw_graph_place(&size, g->output_count, sizeof(pw_plan_output_t),
                                     _Alignof(pw_plan_output_t));
  size_t specs_at = pw_graph_place(&size, g->param_count, sizeof(pw_array_spec_t),
                                   _Alignof(pw_array_spec_t));
  size_t vslices_at = pw_graph_place(&size, g->param_count, sizeof(pw_vslice_obj_t*),
                                     _Alignof(pw_vslice_obj_t*));
  unsigned char* block = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(g->header.runtime->allocator, size, 0, (void**)&block));
  plan->storage = block;
  plan->storage_size = size;
  plan->ops = (pw_plan_op_t*)(block + ops_at);
  plan->outputs = (pw_plan_output_t*)(block + outputs_at);
  plan->param_specs = (pw_array_spec_t*)(block + specs_at);
  plan->param_vslices = (pw_vslice_obj_t**)(block + vslices_at);
  plan->param_count = g->param_count;
  plan->output_count = g->output_count;
  plan->op_count = 0; /* ops built so far, for pw_plan_free on failure */
  if (g->param_count) {
    memcpy(plan->param_specs, g->param_specs, g->param_count * sizeof(pw_array_spec_t));
  }
  *out_inputs = (pw_plan_input_t*)(block + inputs_at);
  *out_successors = (uint32_t*)(block + succ_at);
  return NULL;
}

/* Writes plan op |i| for op node |id| (successors left empty, pointing at
 * |successors|) and its inputs at |input_store|; |op_of_node| maps every
 * op node it reads to its op. For a transfer, also its copies. */
static pw_status_t pw_graph_build_op(pw_graph_obj_t* g, uint32_t i, uint32_t id,
                                     const uint32_t* op_of_node, pw_plan_input_t* input_store,
                                     uint32_t* successors) {
  pw_plan_t* plan = &g->plan;
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  pw_plan_op_t* op = &plan->ops[i];
  bool transfer = n->kind == PW_GRAPH_NODE_TRANSFER;
  *op = (pw_plan_op_t){
      .kind = transfer ? PW_PLAN_TRANSFER : PW_PLAN_COMPUTE,
      .node = id,
      .name = n->name,
      .executable = n->executable,
      .vslice = n->vslice,
      .input_count = n->input_count,
      .inputs = input_store,
      .output_count = transfer ? 1 : n->executable->signature.output_count,
      .successors = successors,
  };
  plan->op_count = i + 1;
  const pw_value_t* inputs = pw_graph_inputs(g, n);
  uint32_t deps_seen[PW_BACKEND_MAX_PARAMS];
  for (uint32_t k = 0; k < n->input_count; ++k) {
    const pw_graph_node_t* src = pw_graph_node_at(g, inputs[k].node);
    pw_plan_input_t* in = &input_store[k];
    in->output = inputs[k].output;
    if (src->kind == PW_GRAPH_NODE_PARAMETER) {
      in->param = (int32_t)src->extra;
      in->op = -1;
    } else {  /* compute or transfer: an op */
      in->param = -1;
      in->op = (int32_t)op_of_node[inputs[k].node];
      bool dup = false;
      for (uint32_t j = 0; j < op->static_deps; ++j) dup |= deps_seen[j] == (uint32_t)in->op;
      if (!dup) deps_seen[op->static_deps++] = (uint32_t)in->op;
      plan->edge_count++;
    }
  }
  if (!transfer) return NULL;
  const pw_graph_transfer_t* t = pw_graph_transfer_at(g, n->extra);
  op->transfer_spec = t->spec; /* the graph's specs do not move once finalized */
  const pw_array_spec_t* in = NULL;
  const pw_vslice_obj_t* src_vslice = NULL;
  PW_RETURN_IF_ERROR(pw_graph_value_spec(g, inputs[0], "input", UINT32_MAX, &in, &src_vslice));
  pw_graph_copy_memo_t* memo = &g->copy_memo;
  if (memo->src != in || memo->dst != t->spec ||
      !pw_mesh_shape_equal(&memo->src_mesh, &src_vslice->mesh) ||
      !pw_mesh_shape_equal(&memo->dst_mesh, &n->vslice->mesh)) {
    pw_plan_arena_t arena = {g->header.runtime->allocator, plan};
    pw_allocator_t copies = {&arena, pw_plan_arena_alloc, pw_plan_arena_free};
    memo->src = NULL; /* invalid until the copies are made */
    PW_RETURN_IF_ERROR(pw__reshard_plan(copies, in, &src_vslice->mesh, t->spec, &n->vslice->mesh,
                                        &memo->copies, &memo->copy_count, &memo->copy_start));
    memo->src = in;
    memo->dst = t->spec;
    memo->src_mesh = src_vslice->mesh;
    memo->dst_mesh = n->vslice->mesh;
  }
  op->copies = memo->copies;
  op->copy_count = memo->copy_count;
  op->copy_start = memo->copy_start;
  return NULL;
}

/* Checks op node |id|'s specs (its producers' are resolved) and resolves a
 * transfer's output; errors name the node. */
static pw_status_t pw_graph_check_op(pw_graph_obj_t* g, uint32_t id, const void* checked[2]) {
  const pw_graph_node_t* n = pw_graph_node_at(g, id);
  pw_status_t status = n->kind == PW_GRAPH_NODE_TRANSFER ? pw_graph_resolve_transfer(g, id)
                                                          : pw_graph_check_compute(g, id, checked);
  if (status) status = pw_status_annotate(status, "graph node %u (\"%s\")", id, n->name);
  return status;
}

/* Lowers a graph whose every input names an earlier node (the usual way to
 * build one). Its topological order is then the order of the node ids
 * (what the heap of pw_graph_lower_sorted yields too), there is no cycle,
 * and one pass in id order checks every op and builds it: a consumer is
 * appended to its producers' successor lists as it is built, and since a
 * consumer's inputs are taken together, a repeated producer is the last
 * successor it has. |succ_start| indexes every node's consumers. */
static pw_status_t pw_graph_lower_forward(pw_graph_obj_t* g, const uint32_t* succ_start,
                                          uint32_t* op_of_node) {
  pw_plan_t* plan = &g->plan;
  pw_plan_input_t* input_store = NULL;
  uint32_t* succ_store = NULL;
  PW_RETURN_IF_ERROR(pw_graph_plan_alloc(g, &input_store, &succ_store));
  const void* checked[2] = {NULL, NULL};
  uint32_t ops = 0;
  for (uint32_t id = 0; id < g->node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    if (n->kind == PW_GRAPH_NODE_PARAMETER) {
      plan->param_vslices[n->extra] = n->vslice;
      op_of_node[id] = UINT32_MAX;
      continue;
    }
    PW_RETURN_IF_ERROR(pw_graph_check_op(g, id, checked));
    uint32_t i = ops++;
    op_of_node[id] = i;
    PW_RETURN_IF_ERROR(pw_graph_build_op(g, i, id, op_of_node, input_store,
                                         succ_store + succ_start[id]));
    for (uint32_t k = 0; k < n->input_count; ++k) {
      int32_t p = input_store[k].op;
      if (p < 0) continue;
      pw_plan_op_t* producer = &plan->ops[p];
      if (producer->successor_count == 0 ||
          producer->successors[producer->successor_count - 1] != i) {
        producer->successors[producer->successor_count++] = i;
      }
    }
    input_store += n->input_count;
  }
  for (uint32_t o = 0; o < g->output_count; ++o) {
    const pw_array_spec_t* spec;
    const pw_vslice_obj_t* vs;
    PW_RETURN_IF_ERROR(pw_graph_value_spec(g, g->outputs[o], "graph output", o, &spec, &vs));
  }
  return NULL;
}

/* Lowers any graph: a topological sort (Kahn, smallest ready id first)
 * through a CSR consumer index (|consumer_start|, counts made prefix
 * sums), then the specs in that order, then the ops. */
static pw_status_t pw_graph_lower_sorted(pw_graph_obj_t* g, const uint32_t* consumer_start,
                                         uint32_t* op_of_node) {
  pw_allocator_t a = g->header.runtime->allocator;
  pw_plan_t* plan = &g->plan;
  const uint32_t node_count = g->node_count;
  const uint32_t computes = node_count - g->param_count;
  /* indegree, order, ready (node_count + 1 each), consumers (inputs + 1). */
  size_t scratch_words = 3 * ((size_t)node_count + 1) + (size_t)g->input_count + 1;
  uint32_t* scratch = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_malloc(a, scratch_words * sizeof(uint32_t), 0,
                                         (void**)&scratch));
  uint32_t* indegree = scratch;
  uint32_t* order = indegree + node_count + 1;
  uint32_t* ready = order + node_count + 1;
  uint32_t* consumers = ready + node_count + 1;
  uint32_t* fill = op_of_node; /* a cursor per node, until the order is known */
  memcpy(fill, consumer_start, (size_t)node_count * sizeof(uint32_t));
  uint32_t ready_count = 0;
  for (uint32_t id = 0; id < node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    const pw_value_t* inputs = pw_graph_inputs(g, n);
    uint32_t deg = 0;
    for (uint32_t k = 0; k < n->input_count; ++k) {
      consumers[fill[inputs[k].node]++] = id;
      deg += pw_graph_is_op(pw_graph_node_at(g, inputs[k].node)->kind);
    }
    indegree[id] = deg;
    if (deg == 0 && pw_graph_is_op(n->kind)) ready[ready_count++] = id; /* ascending: a heap */
  }
  uint32_t tail = 0;
  while (ready_count > 0) {
    uint32_t id = pw_heap_pop(ready, &ready_count);
    order[tail++] = id;
    for (uint32_t c = consumer_start[id]; c < consumer_start[id + 1]; ++c) {
      uint32_t consumer = consumers[c];
      if (--indegree[consumer] == 0) pw_heap_push(ready, &ready_count, consumer);
    }
  }
  pw_status_t status = tail != computes ? pw_graph_cycle_error(g, indegree) : NULL;
  /* Specs, producers before consumers. */
  const void* checked[2] = {NULL, NULL};
  for (uint32_t i = 0; status == NULL && i < computes; ++i) {
    status = pw_graph_check_op(g, order[i], checked);
  }
  for (uint32_t o = 0; status == NULL && o < g->output_count; ++o) {
    const pw_array_spec_t* spec;
    const pw_vslice_obj_t* vs;
    status = pw_graph_value_spec(g, g->outputs[o], "graph output", o, &spec, &vs);
  }
  pw_plan_input_t* input_store = NULL;
  uint32_t* succ_store = NULL;
  if (status == NULL) status = pw_graph_plan_alloc(g, &input_store, &succ_store);
  if (status == NULL) {
    for (uint32_t i = 0; i < computes; ++i) op_of_node[order[i]] = i;
    for (uint32_t id = 0; id < node_count; ++id) {
      const pw_graph_node_t* n = pw_graph_node_at(g, id);
      if (n->kind == PW_GRAPH_NODE_PARAMETER) {
        plan->param_vslices[n->extra] = n->vslice;
        op_of_node[id] = UINT32_MAX;
      }
    }
  }
  for (uint32_t i = 0; status == NULL && i < computes; ++i) {
    uint32_t node_id = order[i];
    status = pw_graph_build_op(g, i, node_id, op_of_node, input_store, succ_store);
    if (status != NULL) break;
    input_store += plan->ops[i].input_count;
    /* Successors: distinct consumer ops. |indegree| is all zeros once the
     * sort succeeded: reuse it to stamp the consumers already taken for
     * op i (linear in fan-out). */
    uint32_t distinct = 0;
    for (uint32_t c = consumer_start[node_id]; c < consumer_start[node_id + 1]; ++c) {
      uint32_t consumer = consumers[c];
      if (indegree[consumer] == i + 1) continue;
      indegree[consumer] = i + 1;
      succ_store[distinct++] = op_of_node[consumer];
    }
    plan->ops[i].successor_count = distinct;
    succ_store += distinct;
  }
  pw_allocator_free(a, scratch, scratch_words * sizeof(uint32_t));
  return status;
}

/* Validates and lowers; called with g->lock held. One pass checks the
 * structure (every reference names a node; specs are checked in
 * topological order, once transfer outputs can be resolved), counts every
 * node's consumers and finds whether inputs only name earlier nodes. */
static pw_status_t pw_graph_lower(pw_graph_obj_t* g) {
  pw_runtime_t* rt = g->header.runtime;
  pw_allocator_t a = rt->allocator;
  pw_plan_t* plan = &g->plan;
  const uint32_t node_count = g->node_count;
  /* consumer_start (node_count + 2), op_of_node (node_count + 1); on the
   * stack for small graphs. */
  size_t scratch_words = 2 * (size_t)node_count + 3;
  uint32_t stack_scratch[128];
  uint32_t* scratch = stack_scratch;
  if (scratch_words > sizeof(stack_scratch) / sizeof(stack_scratch[0])) {
    PW_RETURN_IF_ERROR(pw_allocator_malloc(a, scratch_words * sizeof(uint32_t), 0,
                                           (void**)&scratch));
  }
  uint32_t* consumer_start = scratch;
  uint32_t* op_of_node = consumer_start + node_count + 2;
  memset(consumer_start, 0, ((size_t)node_count + 2) * sizeof(uint32_t));
  pw_status_t status = NULL;
  bool forward = true;
  for (uint32_t id = 0; status == NULL && id < node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    const pw_value_t* inputs = pw_graph_inputs(g, n);
    for (uint32_t k = 0; k < n->input_count; ++k) {
      uint32_t src = inputs[k].node;
      if (src >= node_count) {
        status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                                "graph node %u (\"%s\"): input %u: refers to node %u, which "
                                "does not exist (%u nodes)",
                                id, n->name, k, src, node_count);
        break;
      }
      forward &= src < id;
      consumer_start[src + 1]++;
    }
  }
  if (status == NULL) {
    for (uint32_t id = 0; id < node_count; ++id) consumer_start[id + 1] += consumer_start[id];
    status = forward ? pw_graph_lower_forward(g, consumer_start, op_of_node)
                     : pw_graph_lower_sorted(g, consumer_start, op_of_node);
  }
  for (uint32_t o = 0; status == NULL && o < g->output_count; ++o) {
    const pw_graph_node_t* src = pw_graph_node_at(g, g->outputs[o].node);
    pw_plan_output_t* out = &plan->outputs[o];
    out->output = g->outputs[o].output;
    if (src->kind == PW_GRAPH_NODE_PARAMETER) {
      out->param = (int32_t)src->extra;
      out->op = -1;
    } else {
      out->param = -1;
      out->op = (int32_t)op_of_node[g->outputs[o].node];
      plan->ops[out->op].external_outputs |= 1u << out->output;
    }
  }
  memset(&g->copy_memo, 0, sizeof(g->copy_memo));
  if (scratch != stack_scratch) pw_allocator_free(a, scratch, scratch_words * sizeof(uint32_t));
  if (status != NULL) pw_plan_free(rt, plan);
  return status;
}

static pw_status_t pw_graph_finalize_locked(pw_graph_obj_t* g) {
  if (g->finalized) return NULL;
  PW_RETURN_IF_ERROR(pw_graph_lower(g));
  g->finalized = true;
  pw_atomic_store_u32_release(&g->planned, 1);
  return NULL;
}

pw_status_t pw__graph_plan(pw_client_t* client, struct pw_graph_obj_s* graph,
                           const pw_plan_t** out_plan) {
  (void)client;
  if (pw_atomic_load_u32_acquire(&graph->planned)) {
    *out_plan = &graph->plan;
    return NULL;
  }
  pthread_mutex_lock(&graph->lock);
  pw_status_t status = pw_graph_finalize_locked(graph);
  pthread_mutex_unlock(&graph->lock);
  *out_plan = status == NULL ? &graph->plan : NULL;
  return status;
}

pw_status_t pw_graph_finalize(pw_client_t* client, pw_graph_t graph) {
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  const pw_plan_t* plan;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  pw__object_release(&g->header);
  return status;
}

pw_status_t pw_graph_counts(pw_client_t* client, pw_graph_t graph,
                            pw_graph_counts_t* out_counts) {
  if (out_counts == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "out_counts is NULL");
  }
  memset(out_counts, 0, sizeof(*out_counts));
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  pthread_mutex_lock(&g->lock);
  out_counts->parameters = g->param_count;
  out_counts->computes = g->node_count - g->param_count;
  out_counts->outputs = g->output_count;
  for (uint32_t id = 0; id < g->node_count; ++id) {
    const pw_graph_node_t* n = pw_graph_node_at(g, id);
    const pw_value_t* inputs = pw_graph_inputs(g, n);
    for (uint32_t k = 0; k < n->input_count; ++k) {
      uint32_t src = inputs[k].node;
      if (src < g->node_count && pw_graph_is_op(pw_graph_node_at(g, src)->kind)) {
        out_counts->edges++;
      }
    }
  }
  pthread_mutex_unlock(&g->lock);
  pw__object_release(&g->header);
  return NULL;
}

pw_status_t pw_graph_release(pw_client_t* client, pw_graph_t graph) {
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "client is NULL");
  }
  return pw__handle_remove(client, graph.id, PW_OBJECT_GRAPH, "graph");
}

/* ---- submit ------------------------------------------------------------- */

/* What pw_graph_submit and pw_graph_exec_submit check before anything
 * else; |who| names the call in the messages. */
static pw_status_t pw_submit_check_args(const char* who, const pw_buffer_t* args,
                                        uint32_t arg_count, const pw_submit_options_t* options,
                                        pw_buffer_t* out_outputs, uint32_t output_count) {
  if ((arg_count > 0 && args == NULL) || (output_count > 0 && out_outputs == NULL)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: args or out_outputs is NULL", who);
  }
  if (options != NULL && options->struct_size < sizeof(size_t) + sizeof(const bool*)) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: options struct_size %zu is too small",
                          who, options->struct_size);
  }
  for (uint32_t i = 0; i < output_count; ++i) out_outputs[i].id = 0;
  return NULL;
}

/* The rest of a submission, once the plan is known (|status|: an error
 * found so far, returned after the clean-up). |g|: the caller's
 * reference to the graph (pw_graph_submit; the execution takes it over),
 * or NULL with |armed|. */
static pw_status_t pw_submit_plan(pw_client_t* client, const char* who, pw_graph_obj_t* g,
                                  pw_graph_exec_obj_t* armed, const pw_plan_t* plan,
                                  pw_status_t status, const pw_buffer_t* args,
                                  uint32_t arg_count, const pw_submit_options_t* options,
                                  pw_buffer_t* out_outputs, uint32_t output_count,
                                  pw_event_t** out_done) {
  if (status == NULL && arg_count != plan->param_count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: %u arguments given, the graph has %u parameters", who,
                            arg_count, plan->param_count);
  }
  if (status == NULL && output_count != plan->output_count) {
    status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                            "%s: room for %u outputs given, the graph has %u", who,
                            output_count, plan->output_count);
  }
  pw_runtime_t* rt = client->runtime;
  pw_buffer_obj_t* arg_stack[16];
  pw_buffer_obj_t* out_stack[16];
  pw_buffer_obj_t** arg_objs = arg_stack;
  pw_buffer_obj_t** out_objs = out_stack;
  if (status == NULL && arg_count > 16) {
    status = pw_allocator_calloc_array(rt->allocator, arg_count, sizeof(void*), 0,
                                       (void**)&arg_objs);
  }
  if (status == NULL && output_count > 16) {
    status = pw_allocator_calloc_array(rt->allocator, output_count, sizeof(void*), 0,
                                       (void**)&out_objs);
  }
  uint32_t looked_up = 0;
  for (; status == NULL && looked_up < arg_count; ++looked_up) {
    status = pw__handle_lookup(client, args[looked_up].id, PW_OBJECT_BUFFER, "args",
                               (pw_object_t**)&arg_objs[looked_up]);
    if (status != NULL) {
      /* Name the argument (formatted only on this cold path): look it up
       * again with its index in the message; the same failure, unless the
       * handle changed meanwhile, in which case the look-up stands. */
      pw_status_free(status);
      char what[64];
      snprintf(what, sizeof(what), "%s: args[%u]", who, looked_up);
      status = pw__handle_lookup(client, args[looked_up].id, PW_OBJECT_BUFFER, what,
                                 (pw_object_t**)&arg_objs[looked_up]);
      if (status != NULL) break;
    }
    pw_buffer_obj_t* b = arg_objs[looked_up];
    const pw_array_spec_t* want = &plan->param_specs[looked_up];
    const pw_vslice_obj_t* want_vs = plan->param_vslices[looked_up];
    if (b->slice != want_vs->slice || !pw_mesh_shape_equal(&b->mesh, &want_vs->mesh)) {
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "args[%u]: buffer lives on slice '%s', parameter %u is on "
                              "slice '%s'",
                              looked_up, b->slice->name, looked_up, want_vs->slice->name);
    } else if (!pw_array_spec_equal(&b->spec, want)) {
      char have[160], expect[160];
      pw_array_spec_format(&b->spec, have, sizeof(have));
      pw_array_spec_format(want, expect, sizeof(expect));
      status = pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                              "args[%u]: buffer is %s, parameter %u expects %s", looked_up,
                              have, looked_up, expect);
    }
    if (status != NULL) {
      ++looked_up;
      break;
    }
  }
  pw_event_t* done = NULL;
  if (status == NULL) {
    status = pw__dispatch_submit(client, plan, g != NULL ? &g->header : NULL, armed, arg_objs,
                                 out_objs, out_done != NULL ? &done : NULL);
    /* On success the execution took over the look-up's reference. */
    if (status == NULL) g = NULL;
  }
  /* Hand out output handles. The dispatcher already holds what it needs, so
   * a failure here only loses handles, never work. */
  uint32_t inserted = 0;
  for (; status == NULL && inserted < output_count; ++inserted) {
    status = pw__handle_insert(client, &out_objs[inserted]->header, &out_outputs[inserted].id);
    if (status != NULL) {
      for (uint32_t j = inserted + 1; j < output_count; ++j) {
        pw__object_release(&out_objs[j]->header);
      }
      for (uint32_t j = 0; j < inserted; ++j) {
        pw_status_ignore(pw__handle_remove(client, out_outputs[j].id, PW_OBJECT_BUFFER, "output"));
        out_outputs[j].id = 0;
      }
    }
  }
  if (status == NULL && options != NULL && options->donate != NULL) {
    for (uint32_t i = 0; i < arg_count; ++i) {
      if (options->donate[i]) {
        pw_status_ignore(pw__handle_remove(client, args[i].id, PW_OBJECT_BUFFER, "donated arg"));
      }
    }
  }
  for (uint32_t i = 0; i < looked_up; ++i) pw__object_release(&arg_objs[i]->header);
  if (arg_objs != arg_stack) {
    pw_allocator_free(rt->allocator, arg_objs, arg_count * sizeof(void*));
  }
  if (out_objs != out_stack) {
    pw_allocator_free(rt->allocator, out_objs, output_count * sizeof(void*));
  }
  if (g != NULL) pw__object_release(&g->header);
  if (status == NULL && out_done) {
    *out_done = done;
  } else {
    pw_event_release(done);
  }
  return status;
}

pw_status_t pw_graph_submit(pw_client_t* client, pw_graph_t graph, const pw_buffer_t* args,
                            uint32_t arg_count, const pw_submit_options_t* options,
                            pw_buffer_t* out_outputs, uint32_t output_count,
                            pw_event_t** out_done) {
  static const char who[] = "pw_graph_submit";
  if (out_done) *out_done = NULL;
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: client is NULL", who);
  }
  PW_RETURN_IF_ERROR(
      pw_submit_check_args(who, args, arg_count, options, out_outputs, output_count));
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR_CTX(pw_graph_get(client, graph, &g), "%s", who);
  const pw_plan_t* plan = NULL;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  return pw_submit_plan(client, who, g, NULL, plan, status, args, arg_count, options,
                        out_outputs, output_count, out_done);
}

/* ---- armed graphs ------------------------------------------------------- */

pw_status_t pw_graph_exec_create(pw_client_t* client, pw_graph_t graph,
                                 pw_graph_exec_t** out_exec) {
  if (out_exec == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_exec_create: out_exec is NULL");
  }
  *out_exec = NULL;
  if (client == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "pw_graph_exec_create: client is NULL");
  }
  pw_graph_obj_t* g = NULL;
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, &g));
  const pw_plan_t* plan = NULL;
  pw_status_t status = pw__graph_plan(client, g, &plan);
  pw_graph_exec_obj_t* armed = NULL;
  if (status == NULL) {
    status = pw_allocator_calloc(client->runtime->allocator, sizeof(*armed), 64, (void**)&armed);
  }
  if (status != NULL) {
    pw__object_release(&g->header);
    return pw_status_annotate(status, "pw_graph_exec_create");
  }
  armed->client = client;
  armed->graph = &g->header; /* the look-up's reference, now the armed graph's */
  armed->plan = plan;
  pw__dispatch_exec_register(armed);
  *out_exec = (pw_graph_exec_t*)armed;
  return NULL;
}

/* pw_graph_exec_submit past its short path: checks, look-ups, output
 * handles. Kept out of line so that the short path saves no registers. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static pw_status_t pw_graph_exec_submit_full(pw_graph_exec_obj_t* armed, const pw_buffer_t* args,
                                             uint32_t arg_count,
                                             const pw_submit_options_t* options,
                                             pw_buffer_t* out_outputs, uint32_t output_count,
                                             pw_event_t** out_done) {
  static const char who[] = "pw_graph_exec_submit";
  if (out_done) *out_done = NULL;
  if (armed == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: exec is NULL", who);
  }
  PW_RETURN_IF_ERROR(
      pw_submit_check_args(who, args, arg_count, options, out_outputs, output_count));
  return pw_submit_plan(armed->client, who, NULL, armed, armed->plan, NULL, args, arg_count,
                        options, out_outputs, output_count, out_done);
}

pw_status_t pw_graph_exec_submit(pw_graph_exec_t* exec, const pw_buffer_t* args,
                                 uint32_t arg_count, const pw_submit_options_t* options,
                                 pw_buffer_t* out_outputs, uint32_t output_count,
                                 pw_event_t** out_done) {
  pw_graph_exec_obj_t* armed = (pw_graph_exec_obj_t*)exec;
  if (armed != NULL && arg_count == 0 && output_count == 0 && options == NULL &&
      armed->plan->param_count == 0 && armed->plan->output_count == 0) {
    /* Nothing to check, look up, hand out or donate (a task spawned for
     * its effect): straight to dispatch, which sets *out_done (NULL
     * unless it succeeds). */
    return pw__dispatch_submit(armed->client, armed->plan, NULL, armed, NULL, NULL, out_done);
  }
  return pw_graph_exec_submit_full(armed, args, arg_count, options, out_outputs, output_count,
                                   out_done);
}

pw_status_t pw_graph_exec_destroy(pw_graph_exec_t* exec) {
  if (exec == NULL) return NULL;
  if (pw__in_callback()) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_graph_exec_destroy: called from inside a callback the runtime is "
                          "running, which its runs may wait for; the armed graph is left as "
                          "it is");
  }
  pw__dispatch_exec_destroy((pw_graph_exec_obj_t*)exec);
  return NULL;
}

/* ---- read access for other modules (graph/graph_internal.h) ------------- */

pw_status_t pw__graph_acquire(pw_client_t* client, pw_graph_t graph,
                              struct pw_graph_obj_s** out_graph) {
  PW_RETURN_IF_ERROR(pw_graph_get(client, graph, out_graph));
  pthread_mutex_lock(&(*out_graph)->lock);
  return NULL;
}

void pw__graph_done(struct pw_graph_obj_s* graph) {
  pthread_mutex_unlock(&graph->lock);
  pw__object_release(&graph->header);
}

uint32_t pw__graph_node_count(const struct pw_graph_obj_s* graph) { return graph->node_count; }

uint32_t pw__graph_param_count(const struct pw_graph_obj_s* graph) { return graph->param_count; }

void pw__graph_node(const struct pw_graph_obj_s* graph, uint32_t id,
                    pw__graph_node_view_t* out_view) {
  const pw_graph_node_t* n = pw_graph_node_at(graph, id);
  memset(out_view, 0, sizeof(*out_view));
  out_view->kind = n->kind == PW_GRAPH_NODE_PARAMETER  ? PW__GRAPH_NODE_PARAMETER
                   : n->kind == PW_GRAPH_NODE_COMPUTE  ? PW__GRAPH_NODE_COMPUTE
                   : n->kind == PW_GRAPH_NODE_TRANSFER ? PW__GRAPH_NODE_TRANSFER
                                                       : PW__GRAPH_NODE_OTHER;
  static const pw_array_spec_t no_spec;
  if (n->kind == PW_GRAPH_NODE_TRANSFER) {
    out_view->transfer_sharding = pw_graph_transfer_at(graph, n->extra)->sharding;
  }
  out_view->name = n->name;
  out_view->vslice = n->vslice;
  out_view->executable = n->executable;
  out_view->spec = n->kind == PW_GRAPH_NODE_COMPUTE ? &no_spec : pw_graph_node_spec(graph, n);
  out_view->param_index = n->kind == PW_GRAPH_NODE_PARAMETER ? n->extra : 0;
  out_view->input_count = n->input_count;
  out_view->inputs = pw_graph_inputs(graph, n);
}

uint32_t pw__graph_output_count(const struct pw_graph_obj_s* graph) {
  return graph->output_count;
}

pw_value_t pw__graph_output(const struct pw_graph_obj_s* graph, uint32_t index) {
  return graph->outputs[index];
}

pw_object_t* pw__graph_object(struct pw_graph_obj_s* graph) { return &graph->header; }
