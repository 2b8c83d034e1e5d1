/* The pathways-worker binary as a child process of a test playing the
 * controller: registration with the token from the environment, a
 * plugin backend (by path and by name), a plugin refused for its ABI or
 * its options (the message names the file and the versions), usage
 * errors, and a clean stop on SIGTERM (exit 0, reaped). */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_controller.h"
#include "pathways/plugin.h"
#include <nng/supplemental/util/platform.h>

void pw_test_check_leaks(void);

TestSuite(worker_binary, .fini = pw_test_check_leaks, .timeout = 120);

/* Starts the binary with |args| (NULL-terminated, after argv[0]) and
 * PATHWAYS_TOKEN=|token| (NULL: unset), its stderr into |err_path| when
 * that is not NULL. */
static pid_t wb_spawn_err(const char* token, const char* const* args, const char* err_path) {
  pid_t pid = fork();
  cr_assert_neq(pid, -1);
  if (pid == 0) {
    if (err_path != NULL) {
      FILE* err = fopen(err_path, "w");
      if (err == NULL || dup2(fileno(err), 2) < 0) _exit(126);
    }
    char* argv[16];
    int n = 0;
    argv[n++] = (char*)PW_WORKER_BINARY;
    for (; args[n - 1] != NULL && n < 15; ++n) argv[n] = (char*)args[n - 1];
    argv[n] = NULL;
    if (token != NULL) {
      setenv("PATHWAYS_TOKEN", token, 1);
    } else {
      unsetenv("PATHWAYS_TOKEN");
    }
    unsetenv("PATHWAYS_CONTROLLER");
    execv(PW_WORKER_BINARY, argv);
    _exit(127);
  }
  return pid;
}

static pid_t wb_spawn(const char* token, const char* const* args) {
  return wb_spawn_err(token, args, NULL);
}

/* The first |size| - 1 bytes of |path|, NUL-terminated. */
static void wb_read(const char* path, char* buffer, size_t size) {
  FILE* f = fopen(path, "r");
  cr_assert_not_null(f, "%s", path);
  size_t n = fread(buffer, 1, size - 1, f);
  fclose(f);
  buffer[n] = '\0';
}

/* Waits (bounded) for |pid| to exit; returns its exit status. */
static int wb_reap(pid_t pid) {
  for (int i = 0; i < FC_WAIT_MS / 10; ++i) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    cr_assert_neq(r, -1);
    if (r == pid) {
      cr_assert(WIFEXITED(status), "the worker died of signal %d", WTERMSIG(status));
      return WEXITSTATUS(status);
    }
    nng_msleep(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  cr_assert_fail("the worker did not exit");
  return -1;
}

Test(worker_binary, registers_and_stops_cleanly_on_sigterm) {
  fc_t fc;
  fc_listen(&fc);
  const char* args[] = {"--controller", fc.reg_url, "--devices", "2", "--name", "wb1",
                        "--log-level", "warn", NULL};
  pid_t pid = wb_spawn("secret", args);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_PID], (uint64_t)pid);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_DEVICES], 2);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_QUEUE_DEPTH], 8, "streams mode by default");
  cr_assert_eq(hello.msg.blob[PW_WIRE_HELLO_B_TOKEN].size, 6);
  cr_assert(memcmp(hello.msg.blob[PW_WIRE_HELLO_B_TOKEN].data, "secret", 6) == 0);
  fc_release(&hello);
  fc_welcome(&fc, 0, 100000000ull, 100);
  fc_msg_t m;
  fc_recv(&fc, PW_WIRE_ATTACH, &m);
  fc_release(&m);
  fc_alloc(&fc, 1, 1, 16);
  fc_write(&fc, 2, 1, 0, "0123456789abcdef", 16, PW_STATUS_OK);
  cr_assert_eq(kill(pid, SIGTERM), 0);
  fc_recv(&fc, PW_WIRE_BYE, &m);
  fc_release(&m);
  cr_assert_eq(wb_reap(pid), 0);
  fc_stop(&fc);
}

/* SIGUSR1 prints the worker's dump to stderr; the worker goes on. */
Test(worker_binary, sigusr1_prints_what_the_worker_is_doing) {
  fc_t fc;
  fc_listen(&fc);
  char err_path[] = "/tmp/pw_wb_usr1_XXXXXX";
  int fd = mkstemp(err_path);
  cr_assert_geq(fd, 0);
  close(fd);
  const char* args[] = {"--controller", fc.reg_url, "--devices", "2", "--name", "wbdump",
                        "--log-level", "warn", NULL};
  pid_t pid = wb_spawn_err("secret", args, err_path);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  fc_release(&hello);
  fc_welcome(&fc, 0, 100000000ull, 100);
  fc_msg_t m;
  fc_recv(&fc, PW_WIRE_ATTACH, &m);
  fc_release(&m);
  fc_alloc(&fc, 1, 1, 16);
  fc_write(&fc, 2, 1, 0, "0123456789abcdef", 16, PW_STATUS_OK); /* the ALLOC is done */
  cr_assert_eq(kill(pid, SIGUSR1), 0);
  static char text[8192];
  bool seen = false;
  for (int i = 0; i < FC_WAIT_MS / 10 && !seen; ++i) {
    wb_read(err_path, text, sizeof(text));
    seen = strstr(text, "memories") != NULL;
    if (!seen) nng_msleep(10);
  }
  cr_assert(seen, "no dump on stderr: %s", text);
  cr_assert_not_null(strstr(text, "worker wbdump: in a session"), "%s", text);
  cr_assert_not_null(strstr(text, "device 1: healthy"), "%s", text);
  cr_assert_not_null(strstr(text, "1 memories"), "%s", text);
  /* Still serving: a write is answered, SIGTERM stops it cleanly. */
  fc_write(&fc, 3, 1, 0, "fedcba9876543210", 16, PW_STATUS_OK);
  cr_assert_eq(kill(pid, SIGTERM), 0);
  cr_assert_eq(wb_reap(pid), 0);
  unlink(err_path);
  fc_stop(&fc);
}

Test(worker_binary, loads_a_backend_plugin) {
  fc_t fc;
  fc_listen(&fc);
  const char* args[] = {"--controller", fc.reg_url, "--backend",
                        "plugin:" PW_PLUGIN_CPU ":devices=3,stream_depth=4", "--log-level", "warn",
                        NULL};
  pid_t pid = wb_spawn("secret", args);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_DEVICES], 3);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_QUEUE_DEPTH], 4, "the plugin's own options");
  fc_release(&hello);
  cr_assert_eq(kill(pid, SIGTERM), 0);
  cr_assert_eq(wb_reap(pid), 0);
  fc_stop(&fc);
}

Test(worker_binary, loads_a_bundled_plugin_by_name) {
  fc_t fc;
  fc_listen(&fc);
  /* The binary links the build tree's libpathways.so: "sim" is found in
   * its plugin directory. */
  unsetenv("PATHWAYS_PLUGIN_PATH");
  const char* args[] = {"--controller", fc.reg_url, "--backend",
                        "plugin:sim:slices=1,devices_per_slice=5,queue_depth=2", "--log-level",
                        "warn", NULL};
  pid_t pid = wb_spawn("secret", args);
  fc_msg_t hello;
  fc_recv_hello(&fc, &hello);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_DEVICES], 5);
  cr_assert_eq(hello.msg.u[PW_WIRE_HELLO_QUEUE_DEPTH], 2);
  fc_release(&hello);
  cr_assert_eq(kill(pid, SIGTERM), 0);
  cr_assert_eq(wb_reap(pid), 0);
  fc_stop(&fc);
}

Test(worker_binary, refuses_a_plugin_of_another_abi) {
  char err_path[] = "/tmp/pw-worker-err-XXXXXX";
  int fd = mkstemp(err_path);
  cr_assert_geq(fd, 0);
  close(fd);
  char text[2048];
  const char* args[] = {"--controller", "tcp://127.0.0.1:1", "--backend",
                        "plugin:" PW_PLUGIN_BAD_ABI, NULL};
  cr_assert_eq(wb_reap(wb_spawn_err("secret", args, err_path)), 3);
  wb_read(err_path, text, sizeof(text));
  cr_assert(strstr(text, PW_PLUGIN_BAD_ABI) != NULL, "%s", text);
  cr_assert(strstr(text, "plugin ABI version 999") != NULL, "%s", text);
  char loads[64];
  snprintf(loads, sizeof(loads), "loads plugin ABI version %u", PW_PLUGIN_ABI_VERSION);
  cr_assert(strstr(text, loads) != NULL, "%s", text);
  const char* missing[] = {"--controller", "tcp://127.0.0.1:1", "--backend",
                           "plugin:/nonexistent/plugin.so", NULL};
  cr_assert_eq(wb_reap(wb_spawn_err("secret", missing, err_path)), 3);
  wb_read(err_path, text, sizeof(text));
  cr_assert(strstr(text, "/nonexistent/plugin.so") != NULL, "%s", text);
  const char* bad_args[] = {"--controller", "tcp://127.0.0.1:1", "--backend",
                            "plugin:" PW_PLUGIN_CPU ":cores=2", NULL};
  cr_assert_eq(wb_reap(wb_spawn_err("secret", bad_args, err_path)), 3);
  wb_read(err_path, text, sizeof(text));
  cr_assert(strstr(text, "unknown key 'cores'") != NULL, "%s", text);
  unlink(err_path);
}

Test(worker_binary, usage_errors_exit_2) {
  const char* no_controller[] = {"--devices", "1", NULL};
  cr_assert_eq(wb_reap(wb_spawn("secret", no_controller)), 2);
  const char* no_token[] = {"--controller", "tcp://127.0.0.1:1", NULL};
  cr_assert_eq(wb_reap(wb_spawn(NULL, no_token)), 2);
  const char* bad_flag[] = {"--controller", "tcp://127.0.0.1:1", "--devices", "many", NULL};
  cr_assert_eq(wb_reap(wb_spawn("secret", bad_flag)), 2);
}
