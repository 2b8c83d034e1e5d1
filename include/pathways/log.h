/* libpathways: logging.
 *
 * The library never writes to stdout/stderr on its own. A host sets a
 * pw_logger_t (callback + user pointer + minimum level) in the options of the
 * objects it creates; a zero-initialised logger is silent unless the PW_LOG
 * environment variable says otherwise (pw_logger_default).
 */
#ifndef PATHWAYS_LOG_H_
#define PATHWAYS_LOG_H_

#include "pathways/api.h"

PW_EXTERN_C_BEGIN

typedef enum pw_log_level_e {
  PW_LOG_DEBUG = 0,
  PW_LOG_INFO = 1,
  PW_LOG_WARN = 2,
  PW_LOG_ERROR = 3,
  PW_LOG_OFF = 4,
} pw_log_level_t;

/* Receives one formatted line (no trailing newline). |subsystem| names the
 * module ("event", "cache", ...). Both strings are valid only during the
 * call. May be called from any library thread, concurrently: the callback
 * must be thread-safe. It must not call back into the object that logs. */
typedef void (*pw_log_fn_t)(pw_log_level_t level, const char* subsystem,
                            const char* message, void* user);

typedef struct pw_logger_t {
  pw_log_fn_t fn;          /* NULL: silent (or PW_LOG, see below) */
  void* user;
  pw_log_level_t min_level; /* messages below are dropped before formatting */
} pw_logger_t;

/* The logger used when a host sets none: silent, unless the environment
 * variable PW_LOG is debug|info|warn|error, in which case messages at that
 * level and above go to stderr as "pathways[level] subsystem: message".
 * Reads the environment on each call (no global state). */
PW_API pw_logger_t pw_logger_default(void);

/* A logger writing to stderr at |min_level| and above. */
PW_API pw_logger_t pw_logger_stderr(pw_log_level_t min_level);

/* Parses "debug", "info", "warn"/"warning", "error", "off" (any case) into
 * |*out_level|. Returns false for anything else. */
PW_API bool pw_log_level_parse(const char* text, pw_log_level_t* out_level);

/* "debug", "info", "warn", "error", "off". */
PW_API const char* pw_log_level_string(pw_log_level_t level);

/* Formats and sends a message through |logger| if its level allows. A NULL
 * |logger| or callback drops the message. Thread-safe. */
PW_API void pw_log(const pw_logger_t* logger, pw_log_level_t level,
                   const char* subsystem, const char* format, ...)
    PW_PRINTF_ATTR(4, 5);

/* One line of a dump (pw_runtime_dump, pw_worker_dump): NUL-terminated,
 * no newline, valid during the call only. */
typedef void (*pw_dump_line_fn_t)(void* user, const char* line);

PW_EXTERN_C_END

#endif /* PATHWAYS_LOG_H_ */
