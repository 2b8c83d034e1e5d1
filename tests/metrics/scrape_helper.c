/* For the Prometheus parser test (prometheus_parse_test.py): makes a
 * runtime (two slices of two test-double devices), turns metrics and the
 * HTTP endpoint (127.0.0.1, ephemeral port) on, reports a fixed set of
 * events, prints "port N" and waits until its standard input closes (or
 * a line arrives), then stops everything. The counts it reports are the
 * ones the Python test checks. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "metrics/metrics_support.h"
#include "runtime/fixture.h"

static void events(pw_runtime_t* rt) {
  pw__observe_name_client(rt->observer, 1, "trainer \"A\"\\x");
  pw_obs_event_t e = {.kind = PW_OBS_SUBMIT, .client = 1, .count = 4, .slice = UINT32_MAX,
                      .ts_ns = 10000000};
  mt_event(rt, e);
  for (uint32_t op = 0; op < 4; ++op) {
    e = (pw_obs_event_t){.kind = PW_OBS_LAUNCH, .client = 1, .slice = op % 2, .device = 0,
                         .count = 2, .ts_ns = 10000000};
    mt_event(rt, e);
    e.kind = PW_OBS_LAUNCH_DONE;
    e.since_ns = e.ts_ns;
    e.ts_ns += 4000; /* 4 us: le 5e-06 */
    mt_event(rt, e);
    e.kind = PW_OBS_OP_DONE;
    e.since_ns = 10000000;
    e.ts_ns = 10000000 + 30000000; /* 30 ms: le 0.05 */
    e.flags = op == 3 ? PW_OBS_FAILED : 0;
    mt_event(rt, e);
  }
  e = (pw_obs_event_t){.kind = PW_OBS_COPY_DONE, .slice = 1, .bytes = 1 << 20,
                       .since_ns = 1, .ts_ns = 1 + 700000}; /* 0.7 ms: le 0.001 */
  mt_event(rt, e);
}

int main(void) {
  pw_fixture_t f;
  pw_status_t st = pw_fixture_init(&f, PW_FIXTURE_DOUBLE_INLINE, 2, "2", pw_allocator_system());
  if (st == NULL) st = pw_runtime_metrics_enable(f.runtime, NULL);
  pw_metrics_server_t* server = NULL;
  if (st == NULL) st = pw_metrics_server_start(f.runtime, NULL, &server);
  if (st != NULL) {
    fprintf(stderr, "scrape_helper: %s\n", pw_status_message(st));
    pw_status_free(st);
    return 1;
  }
  events(f.runtime);
  printf("port %u\n", pw_metrics_server_port(server));
  fflush(stdout);
  char line[16];
  (void)!fgets(line, sizeof(line), stdin);
  pw_metrics_server_stop(server);
  pw_fixture_deinit(&f);
  return 0;
}
