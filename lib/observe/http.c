/* The metrics' HTTP endpoint (pw_metrics_server_start) on libmicrohttpd:
 * a daemon with its own polling thread that answers GET (and HEAD)
 * /metrics with the Prometheus exposition of the observer it was started
 * on, 404 elsewhere, 405 for other methods, 503 once that observer is no
 * longer the runtime's (metrics turned off). Bind errors come back from
 * the library's log, caught while the daemon starts, so the status says
 * why. A server is linked into its observer's list: the observer's
 * destroy (at runtime destroy) stops the servers still running. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <microhttpd.h>
#include "pathways/struct_size.h"
#include "observe/metrics.h"

struct pw_metrics_server_s {
  pw_metrics_t* metrics;
  struct MHD_Daemon* daemon;
  uint16_t port;
  struct pw_metrics_server_s* next; /* metrics->servers (servers_lock) */
  /* The library's first error message while the daemon starts. */
  pw_atomic_u32_t starting;
  char start_error[256];
};

/* The response body, grown as the exposition is written. */
typedef struct pw_http_body_t {
  pw_allocator_t allocator;
  char* data;
  size_t size, capacity;
} pw_http_body_t;

static pw_status_t pw_http_body_sink(void* user, const char* data, size_t size) {
  pw_http_body_t* b = user;
  if (b->size + size > b->capacity) {
    size_t capacity = b->capacity == 0 ? 16384 : b->capacity;
    while (capacity < b->size + size) capacity *= 2;
    char* grown = NULL;
    PW_RETURN_IF_ERROR(pw_allocator_malloc(b->allocator, capacity, 0, (void**)&grown));
    if (b->size != 0) memcpy(grown, b->data, b->size);
    pw_allocator_free(b->allocator, b->data, b->capacity);
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->size, data, size);
  b->size += size;
  return NULL;
}

static enum MHD_Result pw_http_reply(struct MHD_Connection* connection, unsigned int code,
                                     const char* content_type, const char* body, size_t size) {
  struct MHD_Response* response =
      MHD_create_response_from_buffer(size, (void*)body, MHD_RESPMEM_MUST_COPY);
  if (response == NULL) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  enum MHD_Result result = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return result;
}

static enum MHD_Result pw_http_text(struct MHD_Connection* connection, unsigned int code,
                                    const char* text) {
  return pw_http_reply(connection, code, "text/plain; charset=utf-8", text, strlen(text));
}

static enum MHD_Result pw_http_scrape(pw_metrics_server_t* server,
                                      struct MHD_Connection* connection) {
  pw_metrics_t* m = server->metrics;
  if (pw__metrics_current(m->runtime) != m) {
    return pw_http_text(connection, MHD_HTTP_SERVICE_UNAVAILABLE,
                        "metrics are off on this runtime (pw_runtime_metrics_disable was "
                        "called after this server started)\n");
  }
  pw_http_body_t body = {.allocator = m->allocator};
  pw_status_t status = pw__metrics_write_prometheus(m, pw_http_body_sink, &body);
  enum MHD_Result result;
  if (status == NULL) {
    result = pw_http_reply(connection, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                           body.data != NULL ? body.data : "", body.size);
  } else {
    char text[512];
    snprintf(text, sizeof(text), "metrics: %s\n", pw_status_message(status));
    pw_status_free(status);
    result = pw_http_text(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, text);
  }
  pw_allocator_free(m->allocator, body.data, body.capacity);
  return result;
}

static enum MHD_Result pw_http_access(void* cls, struct MHD_Connection* connection,
                                      const char* url, const char* method, const char* version,
                                      const char* upload_data, size_t* upload_data_size,
                                      void** con_cls) {
  (void)version;
  (void)upload_data;
  (void)con_cls;
  if (*upload_data_size != 0) { /* a body we do not read */
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
    return pw_http_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
  }
  if (strcmp(url, "/metrics") != 0) {
    return pw_http_text(connection, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
  }
  return pw_http_scrape(cls, connection);
}

PW_PRINTF_ATTR(2, 0) static void pw_http_log(void* cls, const char* format, va_list ap);
static void pw_http_log(void* cls, const char* format, va_list ap) {
  pw_metrics_server_t* server = cls;
  if (pw_atomic_load_u32_acquire(&server->starting) == 0 || server->start_error[0] != '\0') return;
  vsnprintf(server->start_error, sizeof(server->start_error), format, ap);
  size_t n = strlen(server->start_error);
  while (n > 0 && (server->start_error[n - 1] == '\n' || server->start_error[n - 1] == '.')) {
    server->start_error[--n] = '\0';
  }
}

void pw_metrics_server_options_init(pw_metrics_server_options_t* options) {
  if (options == NULL) return;
  memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
}

/* The address to bind: an IPv4 literal, else an IPv6 one. */
static pw_status_t pw_http_address(const char* text, uint16_t port, struct sockaddr_storage* out,
                                   bool* out_ipv6) {
  memset(out, 0, sizeof(*out));
  struct sockaddr_in* v4 = (struct sockaddr_in*)out;
  struct sockaddr_in6* v6 = (struct sockaddr_in6*)out;
  if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *out_ipv6 = false;
    return NULL;
  }
  if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *out_ipv6 = true;
    return NULL;
  }
  return pw_status_make(PW_STATUS_INVALID_ARGUMENT,
                        "pw_metrics_server_start: options.address \"%.64s\" is not an IPv4 or "
                        "IPv6 literal (e.g. \"127.0.0.1\", \"::1\")",
                        text);
}

static pw_status_t pw_http_check(pw_runtime_t* runtime, const pw_metrics_server_options_t* options,
                                 pw_metrics_server_t** out_server) {
  static const char call[] = "pw_metrics_server_start";
  if (out_server == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: out_server is NULL", call);
  }
  *out_server = NULL;
  if (runtime == NULL) {
    return pw_status_make(PW_STATUS_INVALID_ARGUMENT, "%s: runtime is NULL", call);
  }
  if (options != NULL) {
    PW_RETURN_IF_ERROR(PW_STRUCT_CHECK(options, pw_metrics_server_options_t,
                                       PW_METRICS_SERVER_OPTIONS_SIZE_V1, call));
  }
  return NULL;
}

static pw_status_t pw_http_start(pw_metrics_server_t* server, const struct sockaddr_storage* addr,
                                 bool ipv6, const char* address, uint16_t port) {
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  pw_atomic_store_u32_release(&server->starting, 1);
  server->daemon = MHD_start_daemon(
      flags, port, NULL, NULL, pw_http_access, server, MHD_OPTION_EXTERNAL_LOGGER, pw_http_log,
      server, MHD_OPTION_SOCK_ADDR, (const struct sockaddr*)addr, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned int)10, MHD_OPTION_END);
  pw_atomic_store_u32_release(&server->starting, 0);
  if (server->daemon == NULL) {
    return pw_status_make(PW_STATUS_UNAVAILABLE,
                          "pw_metrics_server_start: cannot listen on %s port %u: %s", address,
                          (unsigned)port,
                          server->start_error[0] != '\0' ? server->start_error
                                                         : "libmicrohttpd could not start");
  }
  const union MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
  server->port = info != NULL && info->port != 0 ? info->port : port;
  return NULL;
}

pw_status_t pw_metrics_server_start(pw_runtime_t* runtime,
                                    const pw_metrics_server_options_t* options,
                                    pw_metrics_server_t** out_server) {
  PW_RETURN_IF_ERROR(pw_http_check(runtime, options, out_server));
  const char* address = options != NULL && options->address != NULL ? options->address : "127.0.0.1";
  uint16_t port = options != NULL ? options->port : 0;
  struct sockaddr_storage addr;
  bool ipv6 = false;
  PW_RETURN_IF_ERROR(pw_http_address(address, port, &addr, &ipv6));
  pw_metrics_t* m = pw__metrics_current(runtime);
  if (m == NULL) {
    return pw_status_make(PW_STATUS_FAILED_PRECONDITION,
                          "pw_metrics_server_start: metrics are off on this runtime (call "
                          "pw_runtime_metrics_enable first)");
  }
  pw_metrics_server_t* server = NULL;
  PW_RETURN_IF_ERROR(pw_allocator_calloc(m->allocator, sizeof(*server), 0, (void**)&server));
  server->metrics = m;
  pw_status_t status = pw_http_start(server, &addr, ipv6, address, port);
  if (status != NULL) {
    pw_allocator_free(m->allocator, server, sizeof(*server));
    return status;
  }
  pthread_mutex_lock(&m->servers_lock);
  server->next = m->servers;
  m->servers = server;
  pthread_mutex_unlock(&m->servers_lock);
  *out_server = server;
  return NULL;
}

uint16_t pw_metrics_server_port(const pw_metrics_server_t* server) {
  return server != NULL ? server->port : 0;
}

static void pw_http_free(pw_metrics_server_t* server) {
  MHD_stop_daemon(server->daemon); /* joins its thread: no request runs after */
  pw_allocator_free(server->metrics->allocator, server, sizeof(*server));
}

void pw_metrics_server_stop(pw_metrics_server_t* server) {
  if (server == NULL) return;
  pw_metrics_t* m = server->metrics;
  pthread_mutex_lock(&m->servers_lock);
  for (pw_metrics_server_t** p = &m->servers; *p != NULL; p = &(*p)->next) {
    if (*p == server) {
      *p = server->next;
      break;
    }
  }
  pthread_mutex_unlock(&m->servers_lock);
  pw_http_free(server);
}

void pw__metrics_servers_stop_all(pw_metrics_t* m) {
  pthread_mutex_lock(&m->servers_lock);
  pw_metrics_server_t* list = m->servers;
  m->servers = NULL;
  pthread_mutex_unlock(&m->servers_lock);
  while (list != NULL) {
    pw_metrics_server_t* next = list->next;
    pw_http_free(list);
    list = next;
  }
}
