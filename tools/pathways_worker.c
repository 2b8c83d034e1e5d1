/* pathways-worker: one worker process of the multi-host runtime
 * (docs/remote.md, docs/deploy.md). It hosts one local backend (cpu, sim,
 * or a backend plugin library loaded with pw_plugin_load, pathways/
 * plugin.h and docs/plugins.md) and serves the controller at --controller
 * until SIGTERM or SIGINT. The exit codes are in the usage text below. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/backends/cpu.h"
#include "pathways/backends/sim.h"
#include "pathways/plugin.h"
#include "pathways/worker.h"

enum {
  PW_EXIT_STOPPED = 0,
  PW_EXIT_FAILED = 1,
  PW_EXIT_USAGE = 2,
  PW_EXIT_BACKEND = 3,
};

#define PW_TOOL_TOKEN_MAX 4096

static void pw_tool_usage(FILE* out) {
  fprintf(out,
          "usage: pathways-worker --controller URL [--token-file PATH] [options]\n"
          "\n"
          "Serves a pathways controller: registers at URL, runs what it sends on the\n"
          "local backend, registers again after losing it, until SIGTERM or SIGINT.\n"
          "\n"
          "  --controller URL      registration URL, tcp://HOST:PORT or\n"
          "                        tls+tcp://HOST:PORT (or env PATHWAYS_CONTROLLER)\n"
          "  --token-file PATH     file holding the shared secret (trailing newlines\n"
          "                        dropped); or env PATHWAYS_TOKEN holding the secret\n"
          "                        itself. Required unless --tls-cert is given.\n"
          "  --tls-ca PATH         CA certificates (PEM) the controller's certificate\n"
          "                        must chain to; required for tls+tcp (or env\n"
          "                        PATHWAYS_TLS_CA)\n"
          "  --tls-cert PATH       this worker's client certificate (PEM; or env\n"
          "                        PATHWAYS_TLS_CERT), for a controller that requires one\n"
          "  --tls-key PATH        its unencrypted private key (PEM; or env\n"
          "                        PATHWAYS_TLS_KEY)\n"
          "  --tls-server-name N   the name the controller's certificate must carry\n"
          "                        (default: the URL's host; or env\n"
          "                        PATHWAYS_TLS_SERVER_NAME)\n"
          "  --name NAME           name to register under (default HOSTNAME-PID); a\n"
          "                        worker restarted under the same name takes its place\n"
          "  --backend KIND        cpu (default), sim, or plugin:PLUGIN[:ARGS]: a backend\n"
          "                        plugin library (pathways/plugin.h), PLUGIN a path or\n"
          "                        a name looked up in PATHWAYS_PLUGIN_PATH, then in the\n"
          "                        bundled plugins' directory; ARGS its options, e.g.\n"
          "                        plugin:sim:slices=2,devices_per_slice=4\n"
          "  --devices N           devices of the cpu/sim backend (default 1)\n"
          "  --memory-mib N        cpu/sim: memory per device in MiB (default 1024)\n"
          "  --stream-depth N      cpu/sim: launches each device queues (cpu: streams\n"
          "                        mode, queue-ordered; sim: queue depth; 0: one at a\n"
          "                        time; default 8)\n"
          "  --done-hold-us N      how long a completion may wait for others to share\n"
          "                        its network message while more launches run\n"
          "                        (default 100; 0: never wait)\n"
          "  --no-data-plane       no UCX: copies between workers fail\n"
          "  --log-level LEVEL     debug, info (default), warn, error, off\n"
          "  --help                this text\n"
          "\n"
          "SIGUSR1 prints what the worker is doing (its session, devices, launches\n"
          "not yet answered) to stderr.\n"
          "\n"
          "Exit status: 0 stopped by SIGTERM/SIGINT; 1 the worker failed; 2 usage\n"
          "error (bad flag, no controller, no token, a TLS file missing or bad); 3\n"
          "the backend could not be made (plugin not found or refused: no entry point,\n"
          "another plugin ABI, not a backend; or its create failed).\n");
}

typedef struct pw_tool_args_t {
  const char* controller;
  const char* token_file;
  const char* tls_ca;
  const char* tls_cert;
  const char* tls_key;
  const char* tls_server_name;
  const char* name;
  const char* backend;
  uint32_t devices;
  uint64_t memory_mib;
  uint32_t stream_depth;
  uint64_t done_hold_us;
  bool no_data_plane;
  pw_log_level_t level;
} pw_tool_args_t;

static bool pw_tool_number(const char* flag, const char* text, uint64_t max, uint64_t* out) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v > max) {
    fprintf(stderr, "pathways-worker: %s '%s' is not a number from 0 to %llu\n", flag, text,
            (unsigned long long)max);
    return false;
  }
  *out = v;
  return true;
}

/* A flag not given takes the environment variable's value, if set and
 * not empty. */
static void pw_tool_env(const char** value, const char* variable) {
  const char* env = getenv(variable);
  if (*value == NULL && env != NULL && env[0] != '\0') *value = env;
}

/* Parses the flags; returns -1 to go on, else an exit status. */
static int pw_tool_parse(int argc, char** argv, pw_tool_args_t* a) {
  static const struct option opts[] = {
      {"controller", required_argument, NULL, 'c'}, {"token-file", required_argument, NULL, 't'},
      {"name", required_argument, NULL, 'n'},       {"backend", required_argument, NULL, 'b'},
      {"devices", required_argument, NULL, 'd'},    {"memory-mib", required_argument, NULL, 'm'},
      {"stream-depth", required_argument, NULL, 's'},
      {"done-hold-us", required_argument, NULL, 'H'},
      {"no-data-plane", no_argument, NULL, 'D'},    {"log-level", required_argument, NULL, 'l'},
      {"tls-ca", required_argument, NULL, 'A'},     {"tls-cert", required_argument, NULL, 'C'},
      {"tls-key", required_argument, NULL, 'K'},
      {"tls-server-name", required_argument, NULL, 'S'},
      {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
  *a = (pw_tool_args_t){.backend = "cpu", .devices = 1, .memory_mib = 1024, .stream_depth = 8,
                        .done_hold_us = 100, .level = PW_LOG_INFO};
  uint64_t v = 0;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
      case 'c': a->controller = optarg; break;
      case 't': a->token_file = optarg; break;
      case 'A': a->tls_ca = optarg; break;
      case 'C': a->tls_cert = optarg; break;
      case 'K': a->tls_key = optarg; break;
      case 'S': a->tls_server_name = optarg; break;
      case 'n': a->name = optarg; break;
      case 'b': a->backend = optarg; break;
      case 'd':
        if (!pw_tool_number("--devices", optarg, PW_CPU_MAX_DEVICES, &v) || v == 0) {
          return PW_EXIT_USAGE;
        }
        a->devices = (uint32_t)v;
        break;
      case 'm':
        if (!pw_tool_number("--memory-mib", optarg, 1ull << 30, &v) || v == 0) return PW_EXIT_USAGE;
        a->memory_mib = v;
        break;
      case 's':
        if (!pw_tool_number("--stream-depth", optarg, PW_BACKEND_MAX_QUEUE_DEPTH, &v)) {
          return PW_EXIT_USAGE;
        }
        a->stream_depth = (uint32_t)v;
        break;
      case 'H':
        if (!pw_tool_number("--done-hold-us", optarg, 10000000, &a->done_hold_us)) {
          return PW_EXIT_USAGE;
        }
        break;
      case 'D': a->no_data_plane = true; break;
      case 'l':
        if (!pw_log_level_parse(optarg, &a->level)) {
          fprintf(stderr, "pathways-worker: --log-level '%s' is not debug|info|warn|error|off\n",
                  optarg);
          return PW_EXIT_USAGE;
        }
        break;
      case 'h': pw_tool_usage(stdout); return PW_EXIT_STOPPED;
      default: pw_tool_usage(stderr); return PW_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "pathways-worker: unexpected argument '%s'\n", argv[optind]);
    return PW_EXIT_USAGE;
  }
  if (a->controller == NULL) a->controller = getenv("PATHWAYS_CONTROLLER");
  pw_tool_env(&a->tls_ca, "PATHWAYS_TLS_CA");
  pw_tool_env(&a->tls_cert, "PATHWAYS_TLS_CERT");
  pw_tool_env(&a->tls_key, "PATHWAYS_TLS_KEY");
  pw_tool_env(&a->tls_server_name, "PATHWAYS_TLS_SERVER_NAME");
  if (a->controller == NULL || a->controller[0] == '\0') {
    fprintf(stderr, "pathways-worker: no controller: pass --controller tcp://HOST:PORT or set "
                    "PATHWAYS_CONTROLLER\n");
    return PW_EXIT_USAGE;
  }
  return -1;
}

/* The token from --token-file or PATHWAYS_TOKEN; an exit status on error. */
static int pw_tool_token(const pw_tool_args_t* a, char* token, size_t* out_size) {
  *out_size = 0;
  if (a->token_file != NULL) {
    FILE* f = fopen(a->token_file, "rb");
    if (f == NULL) {
      fprintf(stderr, "pathways-worker: cannot open token file '%s': %s\n", a->token_file,
              strerror(errno));
      return PW_EXIT_USAGE;
    }
    size_t n = fread(token, 1, PW_TOOL_TOKEN_MAX + 1, f);
    fclose(f);
    if (n > PW_TOOL_TOKEN_MAX) {
      fprintf(stderr, "pathways-worker: token file '%s' is over %d bytes\n", a->token_file,
              PW_TOOL_TOKEN_MAX);
      return PW_EXIT_USAGE;
    }
    while (n > 0 && (token[n - 1] == '\n' || token[n - 1] == '\r')) --n;
    *out_size = n;
  } else if (getenv("PATHWAYS_TOKEN") != NULL) {
    const char* env = getenv("PATHWAYS_TOKEN");
    size_t n = strlen(env);
    if (n > PW_TOOL_TOKEN_MAX) {
      fprintf(stderr, "pathways-worker: PATHWAYS_TOKEN is over %d bytes\n", PW_TOOL_TOKEN_MAX);
      return PW_EXIT_USAGE;
    }
    memcpy(token, env, n);
    *out_size = n;
  }
  if (*out_size == 0 && a->tls_cert == NULL) {
    fprintf(stderr, "pathways-worker: no token: pass --token-file PATH or set PATHWAYS_TOKEN "
                    "(the controller's shared secret; it must not be empty), or a TLS client "
                    "certificate (--tls-cert, --tls-key) for a controller that verifies it\n");
    return PW_EXIT_USAGE;
  }
  return -1;
}

/* plugin:PLUGIN[:ARGS]: load (pw_plugin_load checks the library), create.
 * The handle is released at once: the library stays mapped while the
 * process lives, as the backend needs. */
static int pw_tool_plugin(const char* spec, pw_backend_t* out_backend) {
  char name[4096];
  const char* colon = strchr(spec, ':');
  size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
  if (n == 0 || n >= sizeof(name)) {
    fprintf(stderr, "pathways-worker: --backend plugin:PLUGIN[:ARGS] needs a path or a name\n");
    return PW_EXIT_USAGE;
  }
  memcpy(name, spec, n);
  name[n] = '\0';
  const char* args = colon ? colon + 1 : "";
  pw_plugin_t* plugin = NULL;
  pw_status_t s = pw_plugin_load(name, &plugin);
  if (s == NULL) {
    s = pw_plugin_create_backend(plugin, args, out_backend);
    pw_plugin_release(plugin);
  }
  if (s != NULL) {
    fprintf(stderr, "pathways-worker: --backend plugin:%s: %s\n", spec, pw_status_message(s));
    pw_status_free(s);
    return PW_EXIT_BACKEND;
  }
  return -1;
}

static int pw_tool_backend(const pw_tool_args_t* a, pw_logger_t logger,
                           pw_backend_t* out_backend) {
  pw_status_t s = NULL;
  if (strcmp(a->backend, "cpu") == 0) {
    pw_cpu_backend_options_t o;
    pw_cpu_backend_options_init(&o);
    o.logger = logger;
    o.device_count = a->devices;
    o.device_memory_bytes = a->memory_mib << 20;
    o.stream_depth = a->stream_depth;
    s = pw_cpu_backend_create(&o, out_backend);
  } else if (strcmp(a->backend, "sim") == 0) {
    pw_sim_backend_options_t o;
    pw_sim_backend_options_init(&o);
    o.logger = logger;
    o.slice_count = 1;
    o.devices_per_slice = a->devices;
    o.device_memory_bytes = a->memory_mib << 20;
    o.queue_depth = a->stream_depth;
    s = pw_sim_backend_create(&o, out_backend);
  } else if (strncmp(a->backend, "plugin:", 7) == 0) {
    return pw_tool_plugin(a->backend + 7, out_backend);
  } else {
    fprintf(stderr, "pathways-worker: --backend '%s' is not cpu, sim or plugin:PLUGIN[:ARGS]\n",
            a->backend);
    return PW_EXIT_USAGE;
  }
  if (s != NULL) {
    fprintf(stderr, "pathways-worker: %s backend: %s\n", a->backend, pw_status_message(s));
    pw_status_free(s);
    return PW_EXIT_BACKEND;
  }
  return -1;
}

static pw_worker_t* volatile pw_tool_worker;

static void pw_tool_on_signal(int sig) {
  (void)sig;
  pw_worker_stop(pw_tool_worker); /* an atomic store: async-signal-safe */
}

static void pw_tool_dump_line(void* user, const char* line) {
  (void)user;
  fprintf(stderr, "%s\n", line);
}

/* SIGUSR1 prints pw_worker_dump to stderr. The signal is blocked in every
 * thread (main blocks it before any thread exists) and taken here with
 * sigwait, so the dump runs as ordinary code, not in a handler. */
static atomic_int pw_tool_dumper_stop; /* main -> the dump thread */

static void* pw_tool_dumper(void* arg) {
  pw_worker_t* worker = arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0 || atomic_load(&pw_tool_dumper_stop)) break;
    fprintf(stderr, "pathways-worker: SIGUSR1: what the worker is doing\n");
    pw_status_t s = pw_worker_dump(worker, pw_tool_dump_line, NULL);
    if (s != NULL) fprintf(stderr, "pathways-worker: dump: %s\n", pw_status_message(s));
    pw_status_free(s);
    fflush(stderr);
  }
  return NULL;
}

int main(int argc, char** argv) {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);
  pw_tool_args_t a;
  int rc = pw_tool_parse(argc, argv, &a);
  if (rc >= 0) return rc;
  static char token[PW_TOOL_TOKEN_MAX + 1];
  size_t token_size = 0;
  rc = pw_tool_token(&a, token, &token_size);
  if (rc >= 0) return rc;
  pw_logger_t logger = pw_logger_stderr(a.level);
  pw_backend_t backend = {0};
  rc = pw_tool_backend(&a, logger, &backend);
  if (rc >= 0) return rc;
  pw_worker_options_t o;
  pw_worker_options_init(&o);
  o.logger = logger;
  o.controller_url = a.controller;
  o.token = token;
  o.token_size = token_size;
  o.name = a.name;
  o.backend = backend;
  o.no_data_plane = a.no_data_plane;
  o.done_hold_ns = a.done_hold_us == 0 ? UINT64_MAX : a.done_hold_us * 1000;
  o.tls_ca_file = a.tls_ca;
  o.tls_cert_file = a.tls_cert;
  o.tls_key_file = a.tls_key;
  o.tls_server_name = a.tls_server_name;
  pw_worker_t* worker = NULL;
  pw_status_t s = pw_worker_create(&o, &worker);
  if (s != NULL) {
    fprintf(stderr, "pathways-worker: %s\n", pw_status_message(s));
    rc = pw_status_code(s) == PW_STATUS_INVALID_ARGUMENT ? PW_EXIT_USAGE : PW_EXIT_FAILED;
    pw_status_free(s);
    return rc;
  }
  pw_tool_worker = worker;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = pw_tool_on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  pthread_t dumper;
  bool dumping = pthread_create(&dumper, NULL, pw_tool_dumper, worker) == 0;
  s = pw_worker_run(worker);
  if (dumping) {
    atomic_store(&pw_tool_dumper_stop, 1);
    pthread_kill(dumper, SIGUSR1);
    pthread_join(dumper, NULL);
  }
  rc = PW_EXIT_STOPPED;
  if (s != NULL) {
    fprintf(stderr, "pathways-worker: %s\n", pw_status_message(s));
    pw_status_free(s);
    rc = PW_EXIT_FAILED;
  }
  pw_tool_worker = NULL;
  pw_worker_destroy(worker);
  return rc;
}
