#include "support/metric_lookup.h"

#include <stdbool.h>
#include <string.h>

typedef struct pw_test_metric_find_s {
  const char* family;
  const char* label;
  double value;
  uint64_t count;
} pw_test_metric_find_t;

static pw_status_t pw_test_metric_visit(void* user, const pw_metric_sample_t* s) {
  pw_test_metric_find_t* f = user;
  if (strcmp(s->family, f->family) != 0 || f->value >= 0) return NULL;
  bool match = f->label == NULL;
  for (uint32_t i = 0; i < s->label_count && !match; ++i) {
    match = strcmp(s->labels[i].value, f->label) == 0;
  }
  if (match) {
    f->value = s->value;
    f->count = s->count;
  }
  return NULL;
}

double pw_test_metric(pw_runtime_t* runtime, const char* family, const char* label_value,
                      uint64_t* out_count) {
  pw_test_metric_find_t f = {family, label_value, -1, 0};
  pw_status_t s = pw_runtime_metrics_visit(runtime, pw_test_metric_visit, &f);
  if (s != NULL) {
    pw_status_free(s);
    return -1;
  }
  if (out_count != NULL) *out_count = f.count;
  return f.value;
}
