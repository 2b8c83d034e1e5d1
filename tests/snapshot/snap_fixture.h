/* Fixture of the snapshot tests: a CPU-backend runtime of |slices| slices
 * of |devices| devices each, one client, kernels "gate" (copies its input
 * once the test opens the gate) and "boom" (fails), a producer that runs
 * one of them over a buffer, a logger that keeps what it is sent, and a
 * temporary directory per test. Public API only. */
#ifndef PW_TESTS_SNAPSHOT_SNAP_FIXTURE_H_
#define PW_TESTS_SNAPSHOT_SNAP_FIXTURE_H_

#include <pthread.h>

#include "pathways/pathways.h"

typedef struct snap_world_t {
  pw_runtime_t* rt;
  pw_client_t* client;
  pw_backend_t backend;
  uint32_t slices;
  uint32_t devices;
} snap_world_t;

pw_status_t snap_world_init(snap_world_t* w, uint32_t slices, uint32_t devices);
void snap_world_deinit(snap_world_t* w);

/* A vslice spanning the |count| slices |first| .. |first| + count - 1
 * (mesh: count * devices, one axis). */
pw_status_t snap_vslice(snap_world_t* w, uint32_t first, uint32_t count, pw_vslice_t* out);

/* The gate of the "gate" kernel (process-wide; tests run one at a time). */
void snap_gate_close(void);
void snap_gate_open(void);

/* Runs kernel |kernel| ("copy", "gate" or "boom") over |input| (of |spec|
 * on |vs|) and gives its output buffer (not waited for). */
pw_status_t snap_produce(snap_world_t* w, pw_vslice_t vs, const pw_array_spec_t* spec,
                         const char* kernel, pw_buffer_t input, pw_buffer_t* out);

/* Deterministic bytes. */
void snap_fill(void* data, size_t size, uint64_t seed);

/* A logger whose lines are kept (joined by '\n'). */
typedef struct snap_log_t {
  pthread_mutex_t mutex;
  char text[16384];
  size_t size;
} snap_log_t;
void snap_log_init(snap_log_t* log);
pw_logger_t snap_log_logger(snap_log_t* log);
/* True when a kept line contains |needle|. */
bool snap_log_has(snap_log_t* log, const char* needle);

/* A fresh directory under $TMPDIR (or /tmp) into |path| (256 bytes), and
 * its recursive removal. */
void snap_tempdir(char* path);
void snap_rmdir(const char* path);

/* A dir store at |path|. */
pw_status_t snap_dir_store(const char* path, pw_store_t* out);

#endif /* PW_TESTS_SNAPSHOT_SNAP_FIXTURE_H_ */
