/*
 * fuzz_cache.c: libFuzzer harness for the cache's reading of a file it did
 * not write (src/cache: opening, schema checks, moving aside, the row
 * decoder in tj__cache_get).
 *
 * The first input byte picks the mode.  Odd: the rest of the input is the
 * whole cache.db.  Even: the rest is a list of patches (4-byte offset,
 * 1-byte value) applied to a valid cache of three rows built at start-up,
 * which lets the fuzzer reach the pages behind a valid header; bit 1 of
 * the mode byte also truncates the file at the first patch's offset.
 * The file is then opened, every known key and every key in the file is
 * looked up, a row is stored and usage recorded.  Nothing may crash, leak
 * or report an error code outside the documented ones, and no lookup may
 * return code that is not one of the blobs written (a mutated blob would
 * have to forge its XXH3-128 to pass).
 */
#include "cache_api.h"

#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROWS 3

static char dir[256], path[300];
static unsigned char *base;
static size_t base_len;
static unsigned char *blob[ROWS];
static size_t blob_len[ROWS];
static char key[ROWS][TJ__KEY_HEX];

/* Rows of 100 bytes, 5000 bytes (overflow pages) and 1 byte. */
static void make_rows(void)
{
  static const size_t sizes[ROWS] = {100, 5000, 1};
  for (int r = 0; r < ROWS; r++) {
    blob_len[r] = sizes[r];
    blob[r] = malloc(sizes[r]);
    for (size_t i = 0; i < sizes[r]; i++)
      blob[r][i] = (unsigned char)(i * 31 + (size_t)r * 7 + 1);
    tj__hash_hex(&r, sizeof r, key[r]);
  }
}

/* Empty the directory: the file, its WAL and shared memory, and whatever
 * was moved aside. */
static void clean_dir(void)
{
  DIR *d = opendir(dir);
  char p[600];
  if (!d)
    abort();
  for (struct dirent *e; (e = readdir(d));) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
}

static unsigned char *read_all(const char *p, size_t *n)
{
  struct stat st;
  int fd = open(p, O_RDONLY);
  if (fd < 0 || fstat(fd, &st) != 0)
    abort();
  unsigned char *b = malloc((size_t)st.st_size);
  if (read(fd, b, (size_t)st.st_size) != st.st_size)
    abort();
  close(fd);
  *n = (size_t)st.st_size;
  return b;
}

/* A valid cache holding the rows, its WAL folded in by the close. */
static void make_base(void)
{
  tj__cache *c = NULL;
  char msg[1024];
  if (tj__cache_open(path, 0, &c, msg, sizeof msg) != TJ_OK || !c)
    abort();
  for (int r = 0; r < ROWS; r++) {
    tj__cache_row row = {key[r], "k", "gfx90a", "amd", "hiprtc", "", blob[r],
                         blob_len[r], 1};
    if (tj__cache_put(c, &row) != TJ_OK)
      abort();
  }
  tj__cache_close(c);
  base = read_all(path, &base_len);
  const char *seed = getenv("FUZZ_CACHE_WRITE_SEED");
  if (seed) { /* the raw-mode seed of the corpus */
    FILE *f = fopen(seed, "wb");
    fputc(1, f);
    fwrite(base, 1, base_len, f);
    fclose(f);
  }
  clean_dir();
}

static void remove_dir(void)
{
  clean_dir();
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  (void)argc;
  (void)argv;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/fuzz-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    abort();
  snprintf(path, sizeof path, "%s/cache.db", dir);
  atexit(remove_dir);
  make_rows();
  make_base();
  return 0;
}

static void write_file(const unsigned char *data, size_t n)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n))
    abort();
  close(fd);
}

/* The file as the input describes it. */
static void build_file(const uint8_t *data, size_t size)
{
  if (size == 0 || (data[0] & 1)) {
    write_file(size ? data + 1 : data, size ? size - 1 : 0);
    return;
  }
  unsigned char *f = malloc(base_len);
  size_t len = base_len;
  memcpy(f, base, base_len);
  for (size_t at = 1; at + 5 <= size; at += 5) {
    uint32_t off = (uint32_t)data[at] | (uint32_t)data[at + 1] << 8 |
                   (uint32_t)data[at + 2] << 16 | (uint32_t)data[at + 3] << 24;
    off %= (uint32_t)base_len;
    if (at == 1 && (data[0] & 2))
      len = off;
    f[off] = data[at + 4];
  }
  write_file(f, len);
  free(f);
}

/* Returned code must be one of the blobs written. */
static void check_code(const void *code, size_t n)
{
  for (int r = 0; r < ROWS; r++)
    if (n == blob_len[r] && memcmp(code, blob[r], n) == 0)
      return;
  abort();
}

static void look_up(tj__cache *c, const char *k)
{
  void *code = NULL;
  size_t n = 0;
  int dropped = -1;
  tj__cache_row want = {k, "k", "gfx90a", "amd", "hiprtc", "", NULL, 0, 0};
  int rc = tj__cache_get(c, &want, &code, &n, &dropped);
  if (rc == TJ_OK)
    check_code(code, n);
  else if (rc != TJ_ENOENT && rc != TJ_ECACHE)
    abort();
  if (dropped < 0 || dropped > TJ__DROP_SIZE)
    abort();
  free(code);
}

/* The keys the (maybe damaged) file itself lists, through plain SQLite. */
static void look_up_listed(tj__cache *c)
{
  sqlite3 *db;
  sqlite3_stmt *st;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT key FROM code_objects LIMIT 16", -1, &st,
                         NULL) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char *k = sqlite3_column_text(st, 0);
      if (k)
        look_up(c, (const char *)k);
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  build_file(data, size);
  tj__cache *c = NULL;
  char msg[1024];
  unsigned flags = size > 1 && (data[0] & 4) ? TJ_CACHE_READONLY : 0;
  int rc = tj__cache_open(path, flags, &c, msg, sizeof msg);
  /* TJ_ECACHE: a file that cannot be shown to be a cache, left alone. */
  if ((rc != TJ_OK && rc != TJ_ECACHE) || (rc != TJ_OK && c) ||
      strlen(msg) >= sizeof msg)
    abort();
  if (c) {
    for (int r = 0; r < ROWS; r++)
      look_up(c, key[r]);
    look_up_listed(c);
    tj__cache_row row = {key[0], "k", "gfx90a", "amd", "hiprtc", "", blob[0],
                         blob_len[0], 1};
    rc = tj__cache_put(c, &row);
    if (rc != TJ_OK && rc != TJ_ECACHE)
      abort();
    const char *keys[] = {key[1]};
    uint64_t hits[] = {1};
    tj__cache_record_usage(c, keys, hits, 1, 1);
    tj__cache_evict_foreign(c, "hiprtc", 0, NULL);
    look_up(c, key[0]);
    tj__cache_close(c);
  }
  clean_dir();
  return 0;
}
