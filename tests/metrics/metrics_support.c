/* Test support for the metrics: see metrics_support.h. */
#define _POSIX_C_SOURCE 200809L
#include "metrics/metrics_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

pw_status_t mt_collect(void* user, const pw_metric_sample_t* sample) {
  mt_samples_t* s = user;
  if (s->count == sizeof(s->series) / sizeof(s->series[0])) {
    return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "mt_collect: more than %u series",
                          s->count);
  }
  mt_series_t* x = &s->series[s->count++];
  memset(x, 0, sizeof(*x));
  snprintf(x->family, sizeof(x->family), "%s", sample->family);
  size_t used = 0;
  for (uint32_t i = 0; i < sample->label_count; ++i) {
    used += (size_t)snprintf(x->labels + used, sizeof(x->labels) - used, "%s%s=%s",
                             i == 0 ? "" : ",", sample->labels[i].name, sample->labels[i].value);
    if (used >= sizeof(x->labels)) used = sizeof(x->labels) - 1;
  }
  x->type = (int)sample->type;
  x->value = sample->value;
  x->bucket_count = sample->bucket_count < 32 ? sample->bucket_count : 32;
  for (uint32_t b = 0; b < x->bucket_count; ++b) {
    x->bounds[b] = sample->bucket_bounds[b];
    x->buckets[b] = sample->bucket_counts[b];
  }
  x->count = sample->count;
  return NULL;
}

pw_status_t mt_read(pw_runtime_t* rt, mt_samples_t* out) {
  out->count = 0;
  return pw_runtime_metrics_visit(rt, mt_collect, out);
}

const mt_series_t* mt_find(const mt_samples_t* s, const char* family, const char* labels) {
  for (uint32_t i = 0; i < s->count; ++i) {
    if (strcmp(s->series[i].family, family) == 0 && strcmp(s->series[i].labels, labels) == 0) {
      return &s->series[i];
    }
  }
  return NULL;
}

double mt_value(const mt_samples_t* s, const char* family, const char* labels) {
  const mt_series_t* x = mt_find(s, family, labels);
  return x != NULL ? x->value : -1;
}

uint32_t mt_series_of(const mt_samples_t* s, const char* family) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->count; ++i) n += strcmp(s->series[i].family, family) == 0;
  return n;
}

pw_status_t mt_text_sink(void* user, const char* data, size_t size) {
  mt_text_t* t = user;
  if (t->size + size + 1 > t->capacity) {
    size_t capacity = (t->size + size + 1) * 2;
    char* grown = realloc(t->data, capacity);
    if (grown == NULL) return pw_status_make(PW_STATUS_RESOURCE_EXHAUSTED, "mt_text_sink");
    t->data = grown;
    t->capacity = capacity;
  }
  memcpy(t->data + t->size, data, size);
  t->size += size;
  t->data[t->size] = '\0';
  return NULL;
}

void mt_text_free(mt_text_t* t) {
  free(t->data);
  memset(t, 0, sizeof(*t));
}

void mt_event(pw_runtime_t* rt, pw_obs_event_t e) {
  pw_observe_t* o = pw_observing(rt);
  if (o != NULL) pw__observe(o, &e);
}

static bool mt_send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    data += n;
    size -= (size_t)n;
  }
  return true;
}

/* The response's code, Content-Type and body out of |raw|. */
static bool mt_http_parse(char* raw, int* status, char* content_type, size_t content_type_size,
                          char** body) {
  if (sscanf(raw, "HTTP/%*d.%*d %d", status) != 1) return false;
  char* end = strstr(raw, "\r\n\r\n");
  if (end == NULL) return false;
  *end = '\0';
  content_type[0] = '\0';
  for (char* line = strstr(raw, "\r\n"); line != NULL; line = strstr(line + 2, "\r\n")) {
    if (strncasecmp(line + 2, "Content-Type:", 13) == 0) {
      const char* v = line + 2 + 13;
      while (*v == ' ') ++v;
      size_t n = strcspn(v, "\r\n");
      if (n >= content_type_size) n = content_type_size - 1;
      memcpy(content_type, v, n);
      content_type[n] = '\0';
    }
  }
  *body = strdup(end + 4);
  return *body != NULL;
}

bool mt_http(uint16_t port, const char* method, const char* path, int* status,
             char* content_type, size_t content_type_size, char** body) {
  *body = NULL;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  struct timeval timeout = {.tv_sec = 10};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  char request[256];
  int n = snprintf(request, sizeof(request), "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
                   method, path);
  bool ok = connect(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0 &&
            mt_send_all(fd, request, (size_t)n);
  mt_text_t raw = {0};
  char chunk[4096];
  ssize_t got;
  while (ok && (got = recv(fd, chunk, sizeof(chunk), 0)) > 0) {
    pw_status_t s = mt_text_sink(&raw, chunk, (size_t)got);
    ok = s == NULL;
    pw_status_free(s);
  }
  close(fd);
  ok = ok && raw.data != NULL &&
       mt_http_parse(raw.data, status, content_type, content_type_size, body);
  mt_text_free(&raw);
  return ok;
}
