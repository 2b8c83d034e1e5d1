/* The namespace and veth of the partition test (faults_netns.h). */
#define _GNU_SOURCE
#include "faults_netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PWF_NETNS_DIR "/run/netns"

static char g_ip[64]; /* the ip binary, found once */

static bool pwf_find_ip(void) {
  static const char* const kPaths[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
  if (g_ip[0] != '\0') return true;
  for (size_t i = 0; i < sizeof(kPaths) / sizeof(kPaths[0]); ++i) {
    if (access(kPaths[i], X_OK) == 0) {
      snprintf(g_ip, sizeof(g_ip), "%s", kPaths[i]);
      return true;
    }
  }
  return false;
}

/* Runs ip with |argv| (argv[0] unused); its exit status, or -1. Quiet
 * hides its output (deletes that may find nothing). Only fork, execv,
 * waitpid and open: safe in a signal handler. */
static int pwf_ip(char* const* argv, bool quiet) {
  if (g_ip[0] == '\0') return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      if (quiet) dup2(null, 2);
    }
    execv(g_ip, argv);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define PWF_IP(quiet, ...)                              \
  pwf_ip((char* const[]){"ip", __VA_ARGS__, NULL}, quiet)

/* dir/name, without stdio (signal handlers). */
static bool pwf_exists(const char* dir, const char* name) {
  char path[128];
  size_t n = 0;
  for (const char* p = dir; *p != '\0' && n + 2 < sizeof(path); ++p) path[n++] = *p;
  path[n++] = '/';
  for (const char* p = name; *p != '\0' && n + 1 < sizeof(path); ++p) path[n++] = *p;
  path[n] = '\0';
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* Deletes the veth |veth| and the namespace |name| if they exist. */
static void pwf_delete(const char* name, const char* veth) {
  PWF_IP(true, "link", "del", (char*)veth);
  if (pwf_exists(PWF_NETNS_DIR, name)) PWF_IP(true, "netns", "del", (char*)name);
}

/* No such process, or one that died and is not reaped yet (a zombie). */
static bool pwf_pid_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[32], line[256];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return true;
  bool zombie = false;
  if (fgets(line, sizeof(line), f) != NULL) {
    const char* paren = strrchr(line, ')'); /* the name may hold spaces */
    zombie = paren != NULL && (paren[1] == ' ') && (paren[2] == 'Z' || paren[2] == 'X');
  }
  fclose(f);
  return zombie;
}

/* "pwf<digits>" of a pid that is gone (or ours, which we never made). */
static bool pwf_stale(const char* entry, size_t suffix) {
  size_t n = strlen(entry);
  if (n <= 3 + suffix || strncmp(entry, "pwf", 3) != 0) return false;
  pid_t pid = 0;
  for (size_t i = 3; i < n - suffix; ++i) {
    if (entry[i] < '0' || entry[i] > '9') return false;
    pid = pid * 10 + (entry[i] - '0');
  }
  if (suffix == 1 && entry[n - 1] != 'a') return false;
  return pid == getpid() || pwf_pid_gone(pid);
}

/* Namespaces and host-side veths of runs that died without cleaning. */
static void pwf_sweep(void) {
  static const struct { const char* dir; size_t suffix; } kDirs[] = {
      {PWF_NETNS_DIR, 0}, {"/sys/class/net", 1}};
  for (size_t d = 0; d < 2; ++d) {
    DIR* dir = opendir(kDirs[d].dir);
    if (dir == NULL) continue;
    char names[32][16];
    int count = 0;
    for (struct dirent* e; (e = readdir(dir)) != NULL && count < 32;) {
      if (strlen(e->d_name) < 16 && pwf_stale(e->d_name, kDirs[d].suffix)) {
        snprintf(names[count], sizeof(names[count]), "%.*s", (int)(strlen(e->d_name) - kDirs[d].suffix),
                 e->d_name);
        count++;
      }
    }
    closedir(dir);
    for (int i = 0; i < count; ++i) {
      char veth[20];
      snprintf(veth, sizeof(veth), "%sa", names[i]);
      fprintf(stderr, "netns: removing %s, left by an earlier run\n", names[i]);
      pwf_delete(names[i], veth);
    }
  }
}

/* Moves this process into a private network namespace with lo up; the
 * veth's host side then lives there, out of other processes' sight. */
static bool pwf_private_netns(char* why, size_t why_size) {
  if (unshare(CLONE_NEWNET) != 0) {
    snprintf(why, why_size, "unshare(CLONE_NEWNET): %s (not root / no CAP_NET_ADMIN?)",
             strerror(errno));
    return false;
  }
  if (PWF_IP(false, "link", "set", "lo", "up") != 0) {
    snprintf(why, why_size, "ip link set lo up (in the test's own namespace) failed");
    return false;
  }
  return true;
}

bool pwf_netns_create(pwf_netns_t* ns, char* why, size_t why_size) {
  memset(ns, 0, sizeof(*ns));
  if (!pwf_find_ip()) {
    snprintf(why, why_size, "no `ip` binary (iproute2) in /usr/sbin, /sbin, /usr/bin, /bin");
    return false;
  }
  pwf_sweep(); /* before unsharing: leftovers of older runs are in the host's namespace */
  if (!pwf_private_netns(why, why_size)) return false;
  unsigned pid = (unsigned)getpid();
  snprintf(ns->name, sizeof(ns->name), "pwf%u", pid);
  snprintf(ns->host_if, sizeof(ns->host_if), "pwf%ua", pid);
  snprintf(ns->peer_if, sizeof(ns->peer_if), "pwf%ub", pid);
  unsigned b = 200 + (pid >> 14) % 56, c = (pid >> 6) & 0xff, d = (pid & 63) << 2;
  snprintf(ns->host_ip, sizeof(ns->host_ip), "10.%u.%u.%u", b, c, d + 1);
  snprintf(ns->peer_ip, sizeof(ns->peer_ip), "10.%u.%u.%u", b, c, d + 2);
  char host_cidr[24], peer_cidr[24];
  snprintf(host_cidr, sizeof(host_cidr), "%s/30", ns->host_ip);
  snprintf(peer_cidr, sizeof(peer_cidr), "%s/30", ns->peer_ip);
  ns->made = true;
  const char* step = NULL;
  if (pwf_exists(PWF_NETNS_DIR, ns->name)) pwf_delete(ns->name, ns->host_if);
  if (PWF_IP(false, "netns", "add", ns->name) != 0) {
    step = "ip netns add";
  } else if (PWF_IP(false, "link", "add", ns->host_if, "type", "veth", "peer", "name",
                    ns->peer_if) != 0) {
    step = "ip link add ... type veth";
  } else if (PWF_IP(false, "link", "set", ns->peer_if, "netns", ns->name) != 0) {
    step = "ip link set ... netns";
  } else if (PWF_IP(false, "addr", "add", host_cidr, "dev", ns->host_if) != 0 ||
             PWF_IP(false, "link", "set", ns->host_if, "up") != 0) {
    step = "ip addr add (host side)";
  } else if (PWF_IP(false, "-n", ns->name, "addr", "add", peer_cidr, "dev", ns->peer_if) != 0 ||
             PWF_IP(false, "-n", ns->name, "link", "set", ns->peer_if, "up") != 0 ||
             PWF_IP(false, "-n", ns->name, "link", "set", "lo", "up") != 0) {
    step = "ip -n NS addr add / link set up (namespace side)";
  }
  if (step != NULL) {
    snprintf(why, why_size, "%s failed (namespace %s)", step, ns->name);
    pwf_netns_destroy(ns);
    return false;
  }
  return true;
}

bool pwf_netns_link(const pwf_netns_t* ns, bool up) {
  return PWF_IP(false, "link", "set", (char*)ns->host_if, up ? "up" : "down") == 0;
}

int pwf_netns_enter(const pwf_netns_t* ns) {
  char path[64] = PWF_NETNS_DIR "/";
  size_t n = strlen(path);
  for (size_t i = 0; ns->name[i] != '\0' && n + 1 < sizeof(path); ++i) path[n++] = ns->name[i];
  path[n] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rv = setns(fd, CLONE_NEWNET);
  close(fd);
  return rv;
}

void pwf_netns_destroy(pwf_netns_t* ns) {
  if (!ns->made) return;
  pwf_delete(ns->name, ns->host_if);
  ns->made = pwf_netns_exists(ns);
}

bool pwf_netns_exists(const pwf_netns_t* ns) {
  return ns->name[0] != '\0' &&
         (pwf_exists(PWF_NETNS_DIR, ns->name) || if_nametoindex(ns->host_if) != 0);
}
