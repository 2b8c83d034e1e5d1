/* Replays files (or every file of directories) through the fuzz target,
 * for builds without libFuzzer: ctest runs it over the seed corpus. Exit
 * status 0 when every input ran (a failed property aborts). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int pw_replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  size_t capacity = 4096, size = 0;
  uint8_t* data = malloc(capacity);
  size_t n;
  while (data != NULL && (n = fread(data + size, 1, capacity - size, f)) > 0) {
    size += n;
    if (size == capacity) {
      uint8_t* grown = realloc(data, capacity * 2);
      if (grown == NULL) break;
      data = grown;
      capacity *= 2;
    }
  }
  fclose(f);
  if (data == NULL) return 1;
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 0;
}

int main(int argc, char** argv) {
  int failures = 0, files = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      failures += pw_replay_file(argv[i]);
      files++;
      continue;
    }
    DIR* dir = opendir(argv[i]);
    struct dirent* de;
    while (dir != NULL && (de = readdir(dir)) != NULL) {
      if (de->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
      failures += pw_replay_file(path);
      files++;
    }
    if (dir) closedir(dir);
  }
  printf("replayed %d inputs\n", files);
  return failures != 0 || files == 0;
}
