/* End to end, with real processes: a controller in this process and three
 * pathways-worker processes (CPU backend, 2 devices each) on loopback.
 * One graph (a chain of adds on worker 0's slice, a transfer to worker
 * 1's slice over the data plane, an add there, a transfer back through
 * worker 2) runs remotely and in one process; the outputs must be equal
 * bit for bit. Then worker 2 is killed with SIGKILL: its slice must be
 * lost within the heartbeat bound, and a run touching it must resolve
 * with a typed error, never hang. Every child is reaped.
 *
 * Usage: test_remote_e2e PATH_TO_PATHWAYS_WORKER */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pathways/pathways.h"

#define E2E_WORKERS 3
#define E2E_MS 1000000LL
static const char kToken[] = "e2e-token";

#define E2E_CHECK(expr)                                                       \
  do {                                                                        \
    pw_status_t st_ = (expr);                                                 \
    if (st_ != NULL) {                                                        \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr,           \
              pw_status_message(st_));                                        \
      e2e_cleanup();                                                          \
      exit(1);                                                                \
    }                                                                         \
  } while (0)
#define E2E_EXPECT(cond, ...)                                                 \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: expected %s: ", __FILE__, __LINE__, #cond);     \
      fprintf(stderr, __VA_ARGS__);                                           \
      fprintf(stderr, "\n");                                                  \
      e2e_cleanup();                                                          \
      exit(1);                                                                \
    }                                                                         \
  } while (0)

static pid_t g_children[E2E_WORKERS];

static void e2e_cleanup(void) {
  for (int i = 0; i < E2E_WORKERS; ++i) {
    if (g_children[i] > 0) {
      kill(g_children[i], SIGKILL);
      waitpid(g_children[i], NULL, 0);
      g_children[i] = 0;
    }
  }
}

static pid_t e2e_spawn(const char* binary, const char* url, int index) {
  pid_t pid = fork();
  if (pid == 0) {
    char name[16];
    snprintf(name, sizeof(name), "w%d", index);
    setenv("PATHWAYS_TOKEN", kToken, 1);
    execl(binary, binary, "--controller", url, "--name", name, "--backend", "cpu", "--devices",
          "2", "--log-level", "warn", (char*)NULL);
    perror("exec pathways-worker");
    _exit(127);
  }
  return pid;
}

/* The graph on slices 0, 1 and 2 of |runtime|; returns its two outputs. */
static void e2e_run(pw_runtime_t* runtime, float out_a[8], float out_b[8]) {
  pw_client_t* client = NULL;
  E2E_CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs[3];
  for (uint32_t i = 0; i < 3; ++i) {
    E2E_CHECK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs[i]));
  }
  static const char kAdd[] =
      "kernel add\ninput f32[8] split(0,all)\ninput f32[8] split(0,all)\n"
      "output f32[8] split(0,all)\n";
  pw_executable_t add[3];
  for (uint32_t i = 0; i < 3; ++i) {
    E2E_CHECK(pw_executable_compile(client, vs[i], kAdd, strlen(kAdd), NULL, &add[i]));
  }
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {8}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_graph_t g;
  E2E_CHECK(pw_graph_create(client, &g));
  uint32_t a, c1, c2, t1, c3, t2, c4;
  E2E_CHECK(pw_graph_add_parameter(client, g, vs[0], &spec, &a));
  pw_value_t in[2] = {pw_value(a, 0), pw_value(a, 0)};
  E2E_CHECK(pw_graph_add_compute(client, g, "c1", add[0], vs[0], in, 2, &c1));
  in[0] = pw_value(c1, 0);
  E2E_CHECK(pw_graph_add_compute(client, g, "c2", add[0], vs[0], in, 2, &c2));
  E2E_CHECK(pw_graph_add_transfer(client, g, "to1", pw_value(c2, 0), vs[1],
                                  pw_sharding_split(0, PW_MESH_AXIS_ALL), &t1));
  in[0] = pw_value(t1, 0), in[1] = pw_value(t1, 0);
  E2E_CHECK(pw_graph_add_compute(client, g, "c3", add[1], vs[1], in, 2, &c3));
  E2E_CHECK(pw_graph_add_transfer(client, g, "to2", pw_value(c3, 0), vs[2],
                                  pw_sharding_replicated(), &t2));
  in[0] = pw_value(t2, 0), in[1] = pw_value(t2, 0);
  static const char kAddRep[] =
      "kernel add\ninput f32[8] replicated\ninput f32[8] replicated\noutput f32[8] replicated\n";
  pw_executable_t add_rep;
  E2E_CHECK(pw_executable_compile(client, vs[2], kAddRep, strlen(kAddRep), NULL, &add_rep));
  E2E_CHECK(pw_graph_add_compute(client, g, "c4", add_rep, vs[2], in, 2, &c4));
  E2E_CHECK(pw_graph_add_output(client, g, pw_value(c2, 0)));
  E2E_CHECK(pw_graph_add_output(client, g, pw_value(c4, 0)));
  E2E_CHECK(pw_graph_finalize(client, g));
  float host[8];
  for (int i = 0; i < 8; ++i) host[i] = 0.1f * (float)i + 1.0f / 3.0f;
  pw_buffer_t arg;
  E2E_CHECK(pw_buffer_from_host(client, vs[0], &spec, host, sizeof(host), &arg));
  pw_buffer_t outs[2];
  E2E_CHECK(pw_graph_submit(client, g, &arg, 1, NULL, outs, 2, NULL));
  pw_time_t deadline = pw_deadline_from_timeout(20000 * E2E_MS);
  E2E_CHECK(pw_buffer_to_host(client, outs[0], out_a, 8 * sizeof(float), deadline));
  E2E_CHECK(pw_buffer_to_host(client, outs[1], out_b, 8 * sizeof(float), deadline));
  pw_client_destroy(client);
}

/* 64 independent adds on slice 0: the worker's DONEs that end while
 * others still run share frames (lib/worker/outbox.c), so worker 0 sends
 * fewer frames than messages. */
static void e2e_frames(pw_remote_t* remote, uint32_t worker, pw_runtime_t* runtime) {
  pw_client_t* client = NULL;
  E2E_CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  E2E_CHECK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs));
  static const char kAdd[] =
      "kernel add\ninput f32[8] split(0,all)\ninput f32[8] split(0,all)\n"
      "output f32[8] split(0,all)\n";
  pw_executable_t add;
  E2E_CHECK(pw_executable_compile(client, vs, kAdd, strlen(kAdd), NULL, &add));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {8}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_graph_t g;
  E2E_CHECK(pw_graph_create(client, &g));
  uint32_t a, c;
  E2E_CHECK(pw_graph_add_parameter(client, g, vs, &spec, &a));
  pw_value_t in[2] = {pw_value(a, 0), pw_value(a, 0)};
  for (int i = 0; i < 64; ++i) {
    E2E_CHECK(pw_graph_add_compute(client, g, "add", add, vs, in, 2, &c));
    E2E_CHECK(pw_graph_add_output(client, g, pw_value(c, 0)));
  }
  E2E_CHECK(pw_graph_finalize(client, g));
  float host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  pw_buffer_t arg;
  E2E_CHECK(pw_buffer_from_host(client, vs, &spec, host, sizeof(host), &arg));
  pw_remote_worker_info_t before = {.struct_size = sizeof(before)};
  E2E_CHECK(pw_remote_worker_info(remote, worker, &before));
  pw_buffer_t outs[64];
  E2E_CHECK(pw_graph_submit(client, g, &arg, 1, NULL, outs, 64, NULL));
  pw_time_t deadline = pw_deadline_from_timeout(20000 * E2E_MS);
  float got[8];
  for (int i = 0; i < 64; ++i) {
    E2E_CHECK(pw_buffer_to_host(client, outs[i], got, sizeof(got), deadline));
    E2E_EXPECT(got[7] == 16.0f, "add %d: %g", i, (double)got[7]);
  }
  pw_remote_worker_info_t after = {.struct_size = sizeof(after)};
  E2E_CHECK(pw_remote_worker_info(remote, worker, &after));
  uint64_t messages = after.messages_received - before.messages_received;
  uint64_t frames = after.frames_received - before.frames_received;
  E2E_EXPECT(messages >= 64, "%llu messages for 64 launches' DONEs", (unsigned long long)messages);
  E2E_EXPECT(frames < messages, "every one of %llu messages came alone",
             (unsigned long long)messages);
  /* The submission's 64 launches leave in frames of several (its dispatch
   * frame is a batch: lib/base/defer.h). */
  uint64_t sent = after.messages_sent - before.messages_sent;
  uint64_t sent_frames = after.frames_sent - before.frames_sent;
  E2E_EXPECT(sent >= 64 && sent - sent_frames >= 64, "%llu messages sent in %llu frames",
             (unsigned long long)sent, (unsigned long long)sent_frames);
  printf("remote e2e: 64 launches in %llu messages, %llu frames; their completions (and "
         "reads) in %llu messages, %llu frames\n",
         (unsigned long long)sent, (unsigned long long)sent_frames, (unsigned long long)messages,
         (unsigned long long)frames);
  pw_client_destroy(client);
}

/* Host copies with slice 0 (worker w0): 4 MiB go on the data plane
 * both ways (2 MiB per device), 32 bytes in WRITE / READ requests. */
static void e2e_host_copies(pw_remote_t* remote, uint32_t worker, pw_runtime_t* runtime) {
  pw_remote_worker_info_t before = {.struct_size = sizeof(before)};
  E2E_CHECK(pw_remote_worker_info(remote, worker, &before));
  pw_client_t* client = NULL;
  E2E_CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  E2E_CHECK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs));
  uint64_t counts[2] = {1u << 20, 8};
  for (int k = 0; k < 2; ++k) {
    size_t n = (size_t)counts[k];
    float* in = malloc(n * sizeof(float));
    float* out = malloc(n * sizeof(float));
    E2E_EXPECT(in != NULL && out != NULL, "out of memory");
    for (size_t i = 0; i < n; ++i) in[i] = (float)i * 0.25f - 3.0f;
    memset(out, 0, n * sizeof(float));
    pw_array_spec_t spec = {PW_DTYPE_F32, {1, {n}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
    pw_buffer_t buf;
    E2E_CHECK(pw_buffer_from_host(client, vs, &spec, in, n * sizeof(float), &buf));
    E2E_CHECK(pw_buffer_to_host(client, buf, out, n * sizeof(float),
                                pw_deadline_from_timeout(20000 * E2E_MS)));
    E2E_EXPECT(memcmp(in, out, n * sizeof(float)) == 0, "%zu floats changed on the way", n);
    E2E_CHECK(pw_buffer_release(client, buf));
    free(in);
    free(out);
  }
  pw_client_destroy(client);
  pw_remote_worker_info_t after = {.struct_size = sizeof(after)};
  E2E_CHECK(pw_remote_worker_info(remote, worker, &after));
  uint64_t dp = after.host_bytes_data_plane - before.host_bytes_data_plane;
  uint64_t cp = after.host_bytes_control_plane - before.host_bytes_control_plane;
  E2E_EXPECT(dp == 2 * (4u << 20), "%llu bytes on the data plane", (unsigned long long)dp);
  E2E_EXPECT(cp == 2 * 32, "%llu bytes on the control plane", (unsigned long long)cp);
  printf("remote e2e: host copies: %llu bytes on the data plane, %llu in requests\n",
         (unsigned long long)dp, (unsigned long long)cp);
}

static pw_runtime_t* e2e_runtime(const pw_backend_t* backends, uint32_t backend_count,
                                 pw_transport_t transport) {
  pw_slice_desc_t slices[3];
  for (uint32_t i = 0; i < 3; ++i) {
    uint32_t b = backend_count == 1 ? 0 : i;
    slices[i] = (pw_slice_desc_t){NULL, PW_MESH_SHAPE_INIT(1, 2), b, backend_count == 1 ? 2 * i : 0, 0};
  }
  pw_runtime_options_t ro = {0};
  ro.struct_size = sizeof(ro);
  ro.backends = backends;
  ro.backend_count = backend_count;
  ro.slices = slices;
  ro.slice_count = 3;
  ro.transport = transport;
  ro.health_poll_ns = 20 * E2E_MS;
  pw_runtime_t* runtime = NULL;
  E2E_CHECK(pw_runtime_create(&ro, &runtime));
  return runtime;
}

/* A signature past the fixed arrays through LOAD and LAUNCH: a 300-input,
 * 300-output add_scalar (y_i = x_i + 1) on slice 0, every output read. */
#define E2E_WIDE 300u
static void e2e_wide(pw_runtime_t* runtime) {
  pw_client_t* client = NULL;
  E2E_CHECK(pw_client_create(runtime, NULL, &client));
  pw_mesh_shape_t mesh = PW_MESH_SHAPE_INIT(1, 2);
  pw_vslice_t vs;
  E2E_CHECK(pw_vslice_create(client, &mesh, PW_VSLICE_DEFAULT, &vs));
  size_t cap = 64 + (size_t)E2E_WIDE * 2 * 32;
  char* text = malloc(cap);
  pw_value_t* in = malloc(E2E_WIDE * sizeof(*in));
  pw_buffer_t* args = malloc(E2E_WIDE * sizeof(*args));
  pw_buffer_t* outs = malloc(E2E_WIDE * sizeof(*outs));
  E2E_EXPECT(text && in && args && outs, "out of memory");
  size_t at = (size_t)snprintf(text, cap, "kernel add_scalar\nattr value 1\n");
  for (uint32_t i = 0; i < 2 * E2E_WIDE; ++i) {
    at += (size_t)snprintf(text + at, cap - at, "%s f32[2] split(0,all)\n",
                           i < E2E_WIDE ? "input" : "output");
  }
  pw_executable_t e;
  E2E_CHECK(pw_executable_compile(client, vs, text, at, NULL, &e));
  pw_array_spec_t spec = {PW_DTYPE_F32, {1, {2}}, PW_SHARDING_SPLIT_INIT(0, PW_MESH_AXIS_ALL)};
  pw_array_spec_t last;
  E2E_CHECK(pw_executable_param(client, e, PW_PARAM_OUTPUT, E2E_WIDE - 1, &last));
  E2E_EXPECT(pw_array_spec_equal(&last, &spec), "the remote signature's last output");
  pw_graph_t g;
  E2E_CHECK(pw_graph_create(client, &g));
  for (uint32_t i = 0; i < E2E_WIDE; ++i) {
    uint32_t p;
    E2E_CHECK(pw_graph_add_parameter(client, g, vs, &spec, &p));
    in[i] = pw_value(p, 0);
    float x[2] = {(float)i, -(float)i};
    E2E_CHECK(pw_buffer_from_host(client, vs, &spec, x, sizeof(x), &args[i]));
  }
  uint32_t node;
  E2E_CHECK(pw_graph_add_compute(client, g, "wide", e, vs, in, E2E_WIDE, &node));
  for (uint32_t k = 0; k < E2E_WIDE; ++k) E2E_CHECK(pw_graph_add_output(client, g, pw_value(node, k)));
  E2E_CHECK(pw_graph_submit(client, g, args, E2E_WIDE, NULL, outs, E2E_WIDE, NULL));
  pw_time_t deadline = pw_deadline_from_timeout(20000 * E2E_MS);
  for (uint32_t i = 0; i < E2E_WIDE; ++i) {
    float y[2];
    E2E_CHECK(pw_buffer_to_host(client, outs[i], y, sizeof(y), deadline));
    E2E_EXPECT(y[0] == (float)i + 1 && y[1] == 1 - (float)i, "wide output %u: {%g, %g}", i,
               (double)y[0], (double)y[1]);
  }
  printf("remote e2e: a %u-input, %u-output executable ran on a worker\n", E2E_WIDE, E2E_WIDE);
  free(text);
  free(in);
  free(args);
  free(outs);
  pw_client_destroy(client);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_remote_e2e PATH_TO_PATHWAYS_WORKER\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  /* In one process: one CPU backend of 6 devices, three slices of 2. */
  pw_cpu_backend_options_t cpu;
  pw_cpu_backend_options_init(&cpu);
  cpu.device_count = 6;
  cpu.stream_depth = 8;
  pw_backend_t local;
  E2E_CHECK(pw_cpu_backend_create(&cpu, &local));
  pw_runtime_t* here = e2e_runtime(&local, 1, (pw_transport_t){NULL, NULL});
  float want_a[8], want_b[8];
  e2e_run(here, want_a, want_b);
  pw_runtime_destroy(here);

  /* Remotely: three worker processes. */
  pw_remote_options_t o;
  pw_remote_options_init(&o);
  o.token = kToken;
  o.token_size = strlen(kToken);
  o.heartbeat_ns = 50 * E2E_MS;
  o.heartbeat_misses = 6;
  pw_remote_t* remote = NULL;
  E2E_CHECK(pw_remote_create(&o, &remote));
  for (int i = 0; i < E2E_WORKERS; ++i) g_children[i] = e2e_spawn(argv[1], pw_remote_url(remote), i);
  E2E_CHECK(pw_remote_wait_workers(remote, E2E_WORKERS, 30000 * E2E_MS));
  pw_backend_t proxies[E2E_WORKERS];
  uint32_t by_name[E2E_WORKERS];
  for (uint32_t i = 0; i < E2E_WORKERS; ++i) {
    pw_remote_worker_info_t info = {.struct_size = sizeof(info)};
    E2E_CHECK(pw_remote_worker_info(remote, i, &info));
    E2E_EXPECT(info.device_count == 2 && info.attached, "worker %u: %u devices", i,
               info.device_count);
    by_name[info.name[1] - '0'] = i; /* slice k runs on worker "wk" */
  }
  for (uint32_t k = 0; k < E2E_WORKERS; ++k) {
    E2E_CHECK(pw_remote_backend(remote, by_name[k], &proxies[k]));
  }
  pw_transport_t transport;
  E2E_CHECK(pw_remote_transport(remote, &transport));
  pw_runtime_t* there = e2e_runtime(proxies, E2E_WORKERS, transport);
  float got_a[8], got_b[8];
  e2e_run(there, got_a, got_b);
  E2E_EXPECT(memcmp(got_a, want_a, sizeof(got_a)) == 0, "chain output differs");
  E2E_EXPECT(memcmp(got_b, want_b, sizeof(got_b)) == 0, "transferred output differs");
  printf("remote e2e: outputs equal bit for bit (%g .. %g)\n", (double)got_b[0], (double)got_b[7]);
  e2e_host_copies(remote, by_name[0], there);
  e2e_frames(remote, by_name[0], there);
  e2e_wide(there);

  /* Kill worker w2: its slice is lost within the bound. */
  pw_time_t killed = pw_clock_now();
  kill(g_children[2], SIGKILL);
  waitpid(g_children[2], NULL, 0);
  g_children[2] = 0;
  pw_slice_info_t si = {.struct_size = sizeof(si)};
  pw_time_t deadline = pw_deadline_from_timeout(10000 * E2E_MS);
  do {
    struct timespec ts = {0, 5 * E2E_MS};
    nanosleep(&ts, NULL);
    E2E_CHECK(pw_runtime_slice_info(there, 2, &si));
  } while (si.state != PW_SLICE_LOST && pw_deadline_remaining(deadline) > 0);
  pw_duration_t detect = pw_clock_now() - killed;
  E2E_EXPECT(si.state == PW_SLICE_LOST, "slice 2 still %s", pw_slice_state_name(si.state));
  pw_duration_t bound = o.heartbeat_ns * o.heartbeat_misses + 20 * E2E_MS;
  printf("remote e2e: killed worker's slice lost after %lld ms (bound %lld ms)\n",
         (long long)(detect / E2E_MS), (long long)(bound / E2E_MS));
  pw_runtime_destroy(there);
  pw_remote_destroy(remote);
  e2e_cleanup();
  return 0;
}
