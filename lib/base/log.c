#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "pathways/log.h"

static const char* const pw_log_level_names[] = {"debug", "info", "warn",
                                                 "error", "off"};

const char* pw_log_level_string(pw_log_level_t level) {
  if ((unsigned)level > PW_LOG_OFF) return "?";
  return pw_log_level_names[level];
}

bool pw_log_level_parse(const char* text, pw_log_level_t* out_level) {
  if (text == NULL || out_level == NULL) return false;
  static const struct {
    const char* name;
    pw_log_level_t level;
  } table[] = {{"debug", PW_LOG_DEBUG}, {"info", PW_LOG_INFO},
               {"warn", PW_LOG_WARN},   {"warning", PW_LOG_WARN},
               {"error", PW_LOG_ERROR}, {"off", PW_LOG_OFF}};
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (strcasecmp(text, table[i].name) == 0) {
      *out_level = table[i].level;
      return true;
    }
  }
  return false;
}

static void pw_log_to_stderr(pw_log_level_t level, const char* subsystem,
                             const char* message, void* user) {
  (void)user;
  /* One fprintf per line: stdio locks the stream, so concurrent lines do not
   * interleave. */
  fprintf(stderr, "pathways[%s] %s: %s\n", pw_log_level_string(level),
          subsystem ? subsystem : "-", message);
}

pw_logger_t pw_logger_stderr(pw_log_level_t min_level) {
  pw_logger_t logger = {pw_log_to_stderr, NULL, min_level};
  return logger;
}

pw_logger_t pw_logger_default(void) {
  pw_log_level_t level;
  if (pw_log_level_parse(getenv("PW_LOG"), &level) && level != PW_LOG_OFF) {
    return pw_logger_stderr(level);
  }
  pw_logger_t silent = {NULL, NULL, PW_LOG_OFF};
  return silent;
}

void pw_log(const pw_logger_t* logger, pw_log_level_t level,
            const char* subsystem, const char* format, ...) {
  if (logger == NULL || logger->fn == NULL || level < logger->min_level ||
      level >= PW_LOG_OFF) {
    return;
  }
  char message[1024];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  if (n < 0) return;
  logger->fn(level, subsystem, message, logger->user);
}
