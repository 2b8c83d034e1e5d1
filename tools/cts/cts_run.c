/* pathways-cts: the runner (see cts_run.h). Each case runs in a child
 * process of its own: a crash (a signal), an exit from inside the plugin
 * or a hang (killed at the deadline) fails that case, reported with what
 * the child printed, and the run goes on with the next one. */
#define _XOPEN_SOURCE 700 /* fnmatch, mkdtemp, nftw, kill */
#include "cts_run.h"

#include <errno.h>
#include <fnmatch.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PW_CTS_OUTPUT_MAX (64u * 1024u)

typedef enum pw_cts_outcome_t {
  PW_CTS_PASS = 0,
  PW_CTS_FAILED = 1,
  PW_CTS_SKIPPED = 2,
} pw_cts_outcome_t;

typedef struct pw_cts_result_t {
  pw_cts_outcome_t outcome;
  char reason[128];   /* "signal 11 (Segmentation fault)", a skip reason... */
  char* output;       /* what the case printed (NUL-terminated; may be NULL) */
  double seconds;
} pw_cts_result_t;

bool pw_cts_case_matches(const char* kind, const char* bare, const char* name) {
  if (strcmp(name, bare) == 0) return true;
  size_t k = strlen(kind);
  return strncmp(name, kind, k) == 0 && name[k] == '.' && strcmp(name + k + 1, bare) == 0;
}

static bool pw_cts_listed(const pw_cts_run_options_t* o, const char* bare) {
  for (const char* const* u = o->unsupported; u != NULL && *u != NULL; ++u) {
    if (pw_cts_case_matches(o->kind, bare, *u)) return true;
  }
  return false;
}

static bool pw_cts_selected(const pw_cts_run_options_t* o, const char* full) {
  return o->filter == NULL || fnmatch(o->filter, full, 0) == 0;
}

/* |args| with each "{tmp}" replaced by |dir|; the caller frees it. */
static char* pw_cts_expand_args(const char* args, const char* dir) {
  size_t count = 0;
  for (const char* p = strstr(args, "{tmp}"); p != NULL; p = strstr(p + 5, "{tmp}")) ++count;
  size_t size = strlen(args) + count * strlen(dir) + 1;
  char* out = malloc(size);
  if (out == NULL) return NULL;
  char* w = out;
  for (const char* p = args; *p != '\0';) {
    if (strncmp(p, "{tmp}", 5) == 0) {
      w = stpcpy(w, dir);
      p += 5;
    } else {
      *w++ = *p++;
    }
  }
  *w = '\0';
  return out;
}

static int pw_cts_remove_entry(const char* path, const struct stat* st, int flag,
                               struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

/* Reads the child's output until EOF or |deadline_ns|; returns false on
 * timeout. */
static bool pw_cts_collect(int fd, uint64_t deadline_ns, char* buffer, size_t* length) {
  for (;;) {
    uint64_t now = pw_cts_now_ns();
    if (now >= deadline_ns) return false;
    uint64_t left_ms = (deadline_ns - now) / 1000000u + 1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, left_ms > 1000 ? 1000 : (int)left_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    size_t room = PW_CTS_OUTPUT_MAX - 1 - *length;
    size_t take = (size_t)n < room ? (size_t)n : room;
    memcpy(buffer + *length, chunk, take);
    *length += take;
  }
}

static void pw_cts_child(const pw_cts_case_t* c, const pw_cts_context_t* ctx, int fd) {
  setpgid(0, 0);
  dup2(fd, STDOUT_FILENO);
  dup2(fd, STDERR_FILENO);
  close(fd);
  c->fn(ctx);
  fflush(NULL);
  exit(0); /* not _Exit: LeakSanitizer's check runs at exit */
}

static void pw_cts_reason_from(pw_cts_result_t* r, int wstatus, bool timed_out,
                               unsigned timeout_s) {
  if (timed_out) {
    r->outcome = PW_CTS_FAILED;
    snprintf(r->reason, sizeof(r->reason), "timeout after %u s (hang)", timeout_s);
  } else if (WIFSIGNALED(wstatus)) {
    r->outcome = PW_CTS_FAILED;
    snprintf(r->reason, sizeof(r->reason), "signal %d (%s)", WTERMSIG(wstatus),
             strsignal(WTERMSIG(wstatus)));
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    r->outcome = PW_CTS_PASS;
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == PW_CTS_EXIT_SKIP) {
    r->outcome = PW_CTS_SKIPPED;
    const char* why = r->output != NULL ? strstr(r->output, "SKIP: ") : NULL;
    snprintf(r->reason, sizeof(r->reason), "%s", why != NULL ? why + 6 : "skipped");
    char* nl = strchr(r->reason, '\n');
    if (nl != NULL) *nl = '\0';
  } else {
    r->outcome = PW_CTS_FAILED;
    snprintf(r->reason, sizeof(r->reason), "exit status %d", WEXITSTATUS(wstatus));
  }
}

/* Runs one case in a child; fills |r|. */
static void pw_cts_run_one(const pw_cts_run_options_t* o, const pw_cts_case_t* c,
                           pw_cts_context_t* ctx, pw_cts_result_t* r) {
  memset(r, 0, sizeof(*r));
  char dir[4096];
  const char* base = getenv("TMPDIR");
  snprintf(dir, sizeof(dir), "%s/pathways-cts-XXXXXX", base != NULL && *base ? base : "/tmp");
  char* args = NULL;
  if (mkdtemp(dir) == NULL || (args = pw_cts_expand_args(o->args, dir)) == NULL) {
    r->outcome = PW_CTS_FAILED;
    snprintf(r->reason, sizeof(r->reason), "cannot make a temporary directory: %s",
             strerror(errno));
    return;
  }
  ctx->args = args;
  ctx->tmp_dir = dir;
  uint64_t start = pw_cts_now_ns();
  if (o->no_fork) {
    c->fn(ctx);
    r->outcome = PW_CTS_PASS;
  } else {
    int fds[2];
    pid_t pid = -1;
    if (pipe(fds) == 0) {
      fflush(NULL);
      pid = fork();
    }
    if (pid == 0) {
      close(fds[0]);
      pw_cts_child(c, ctx, fds[1]);
    }
    if (pid < 0) {
      r->outcome = PW_CTS_FAILED;
      snprintf(r->reason, sizeof(r->reason), "cannot start the case: %s", strerror(errno));
    } else {
      close(fds[1]);
      r->output = calloc(1, PW_CTS_OUTPUT_MAX);
      size_t length = 0;
      uint64_t deadline = start + (uint64_t)o->timeout_s * 1000000000ull;
      bool in_time = r->output != NULL && pw_cts_collect(fds[0], deadline, r->output, &length);
      int wstatus = 0;
      pid_t done = 0;
      while (in_time && (done = waitpid(pid, &wstatus, WNOHANG)) == 0) {
        if (pw_cts_now_ns() >= deadline) {
          in_time = false;
          break;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
      }
      if (!in_time || done != pid) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &wstatus, 0);
      }
      close(fds[0]);
      pw_cts_reason_from(r, wstatus, !in_time, o->timeout_s);
    }
  }
  r->seconds = (double)(pw_cts_now_ns() - start) / 1e9;
  nftw(dir, pw_cts_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(args);
  ctx->args = NULL;
  ctx->tmp_dir = NULL;
}

/* --- Reports. --- */

static void pw_cts_tap_case(FILE* out, size_t number, const char* full,
                            const pw_cts_result_t* r) {
  switch (r->outcome) {
    case PW_CTS_PASS: fprintf(out, "ok %zu - %s\n", number, full); break;
    case PW_CTS_SKIPPED: fprintf(out, "ok %zu - %s # SKIP %s\n", number, full, r->reason); break;
    case PW_CTS_FAILED:
      fprintf(out, "not ok %zu - %s # %s\n", number, full, r->reason);
      break;
  }
  if (r->outcome == PW_CTS_FAILED && r->output != NULL) {
    for (const char* line = r->output; *line != '\0';) {
      const char* nl = strchr(line, '\n');
      int n = nl != NULL ? (int)(nl - line) : (int)strlen(line);
      fprintf(out, "# %.*s\n", n, line);
      line += n + (nl != NULL ? 1 : 0);
    }
  }
  fflush(out);
}

static void pw_cts_xml_text(FILE* out, const char* s) {
  for (; s != NULL && *s != '\0'; ++s) {
    unsigned char c = (unsigned char)*s;
    switch (c) {
      case '<': fputs("&lt;", out); break;
      case '>': fputs("&gt;", out); break;
      case '&': fputs("&amp;", out); break;
      case '"': fputs("&quot;", out); break;
      default:
        /* XML 1.0 forbids most control characters. */
        if (c < 0x20 && c != '\n' && c != '\t') {
          fputc('?', out);
        } else {
          fputc(c, out);
        }
    }
  }
}

static void pw_cts_junit(FILE* out, const pw_cts_run_options_t* o, const char* const* names,
                         const pw_cts_result_t* results, size_t count) {
  size_t failures = 0, skipped = 0;
  double total = 0;
  for (size_t i = 0; i < count; ++i) {
    failures += results[i].outcome == PW_CTS_FAILED;
    skipped += results[i].outcome == PW_CTS_SKIPPED;
    total += results[i].seconds;
  }
  fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  fprintf(out, "<testsuites tests=\"%zu\" failures=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n",
          count, failures, skipped, total);
  fprintf(out, "  <testsuite name=\"");
  pw_cts_xml_text(out, o->suite_name);
  fprintf(out, "\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
          count, failures, skipped, total);
  for (size_t i = 0; i < count; ++i) {
    const pw_cts_result_t* r = &results[i];
    fprintf(out, "    <testcase classname=\"pathways-cts.%s\" name=\"%s\" time=\"%.3f\"",
            o->kind, names[i] + strlen(o->kind) + 1, r->seconds);
    if (r->outcome == PW_CTS_PASS) {
      fputs("/>\n", out);
      continue;
    }
    fputs(">\n", out);
    if (r->outcome == PW_CTS_SKIPPED) {
      fputs("      <skipped message=\"", out);
      pw_cts_xml_text(out, r->reason);
      fputs("\"/>\n", out);
    } else {
      fputs("      <failure message=\"", out);
      pw_cts_xml_text(out, r->reason);
      fputs("\">", out);
      pw_cts_xml_text(out, r->output);
      fputs("</failure>\n", out);
    }
    fputs("    </testcase>\n", out);
  }
  fputs("  </testsuite>\n</testsuites>\n", out);
}

int pw_cts_run(const pw_cts_run_options_t* o, pw_cts_context_t* ctx) {
  size_t selected = 0;
  char** names = calloc(o->case_count + 1, sizeof(char*));
  pw_cts_result_t* results = calloc(o->case_count + 1, sizeof(pw_cts_result_t));
  if (names == NULL || results == NULL) {
    free(names);
    free(results);
    return -1;
  }
  const pw_cts_case_t** chosen = calloc(o->case_count + 1, sizeof(*chosen));
  for (size_t i = 0; chosen != NULL && i < o->case_count; ++i) {
    char full[256];
    snprintf(full, sizeof(full), "%s.%s", o->kind, o->cases[i].name);
    if (!pw_cts_selected(o, full)) continue;
    names[selected] = strdup(full);
    chosen[selected++] = &o->cases[i];
  }
  if (o->format == PW_CTS_FORMAT_TAP) {
    fprintf(o->out, "TAP version 13\n# %s\n1..%zu\n", o->suite_name, selected);
    fflush(o->out);
  }
  int failed = 0;
  for (size_t i = 0; i < selected; ++i) {
    pw_cts_result_t* r = &results[i];
    if (pw_cts_listed(o, chosen[i]->name)) {
      memset(r, 0, sizeof(*r));
      r->outcome = PW_CTS_SKIPPED;
      snprintf(r->reason, sizeof(r->reason), "listed as unsupported");
    } else {
      pw_cts_run_one(o, chosen[i], ctx, r);
    }
    failed += r->outcome == PW_CTS_FAILED;
    if (o->format == PW_CTS_FORMAT_TAP) pw_cts_tap_case(o->out, i + 1, names[i], r);
  }
  if (o->format == PW_CTS_FORMAT_JUNIT) {
    pw_cts_junit(o->out, o, (const char* const*)names, results, selected);
  } else {
    fprintf(o->out, "# %zu cases: %d failed\n", selected, failed);
  }
  int rc = fflush(o->out) == 0 && !ferror(o->out) ? failed : -1;
  for (size_t i = 0; i < selected; ++i) {
    free(names[i]);
    free(results[i].output);
  }
  free(names);
  free(results);
  free(chosen);
  return rc;
}
