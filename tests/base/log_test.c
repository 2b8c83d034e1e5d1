#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>

#include "pathways/pathways.h"
#include "support/test_allocators.h"

TestSuite(log, .fini = pw_test_check_leaks);

typedef struct captured_t {
  int count;
  pw_log_level_t level;
  char subsystem[32];
  char message[256];
} captured_t;

static void capture(pw_log_level_t level, const char* subsystem,
                    const char* message, void* user) {
  captured_t* c = user;
  c->count++;
  c->level = level;
  snprintf(c->subsystem, sizeof(c->subsystem), "%s", subsystem);
  snprintf(c->message, sizeof(c->message), "%s", message);
}

Test(log, callback_receives_formatted_messages_at_or_above_level) {
  captured_t c = {0};
  pw_logger_t logger = {capture, &c, PW_LOG_INFO};
  pw_log(&logger, PW_LOG_DEBUG, "event", "dropped %d", 1);
  cr_assert_eq(c.count, 0);
  pw_log(&logger, PW_LOG_WARN, "cache", "entry %s is corrupt", "ab12");
  cr_assert_eq(c.count, 1);
  cr_assert_eq(c.level, PW_LOG_WARN);
  cr_assert_str_eq(c.subsystem, "cache");
  cr_assert_str_eq(c.message, "entry ab12 is corrupt");
  pw_log(&logger, PW_LOG_OFF, "x", "never");
  cr_assert_eq(c.count, 1);
  pw_log(NULL, PW_LOG_ERROR, "x", "no logger");
}

Test(log, default_is_silent_without_env) {
  unsetenv("PW_LOG");
  pw_logger_t logger = pw_logger_default();
  cr_assert_null(logger.fn);
  setenv("PW_LOG", "bogus", 1);
  cr_assert_null(pw_logger_default().fn);
  setenv("PW_LOG", "off", 1);
  cr_assert_null(pw_logger_default().fn);
  unsetenv("PW_LOG");
}

Test(log, env_routes_to_stderr, .init = cr_redirect_stderr) {
  setenv("PW_LOG", "WARN", 1);
  pw_logger_t logger = pw_logger_default();
  cr_assert_not_null(logger.fn);
  cr_assert_eq(logger.min_level, PW_LOG_WARN);
  pw_log(&logger, PW_LOG_INFO, "sched", "hidden");
  pw_log(&logger, PW_LOG_ERROR, "sched", "slice %d offline", 3);
  unsetenv("PW_LOG");
  fflush(stderr);
  cr_assert_stderr_eq_str("pathways[error] sched: slice 3 offline\n");
}

Test(log, levels_parse_and_print) {
  pw_log_level_t level;
  cr_assert(pw_log_level_parse("debug", &level) && level == PW_LOG_DEBUG);
  cr_assert(pw_log_level_parse("Info", &level) && level == PW_LOG_INFO);
  cr_assert(pw_log_level_parse("warning", &level) && level == PW_LOG_WARN);
  cr_assert(pw_log_level_parse("ERROR", &level) && level == PW_LOG_ERROR);
  cr_assert_not(pw_log_level_parse("loud", &level));
  cr_assert_not(pw_log_level_parse(NULL, &level));
  cr_assert_str_eq(pw_log_level_string(PW_LOG_WARN), "warn");
  cr_assert_str_eq(pw_log_level_string((pw_log_level_t)99), "?");
}
