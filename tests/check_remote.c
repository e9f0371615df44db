/*
 * check_remote.c: the remote tier on real Redis servers and one compile
 * per key.  The suite starts its own redis-server instances on free
 * loopback ports (--save "" --appendonly no, in a temporary directory)
 * and stops them (and they die with the test however it ends, stopped
 * or not); it is skipped (77) when redis-server is not installed
 * or the library was built without hiredis.  Every process stands for a
 * machine: its own empty per-user cache, one shared remote.  Compiles
 * are counted through the tj_stats each process sends back.  Faults are
 * scripted: servers stopped (SIGSTOP), killed and restarted, and small
 * socket servers of the test's own that answer slowly, endlessly or
 * wrongly.
 */
#include "testutil.h"

#ifdef TJ_HAVE_HIREDIS
#include "testremote.h"

/* ------------------------------------------------------- placement */

START_TEST(rendezvous_hashing_moves_few_keys)
{
  tj__remote_settings set;
  char why[256], msg[256];
  tj__remote_settings_env(&set, why, sizeof why);
  tj__remote *three, *four;
  ck_assert_int_eq(tj__remote_open("redis://a:1,redis://b:2,redis://c:3",
                                   &set, &three, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(tj__remote_open("redis://a:1,redis://b:2,redis://c:3,"
                                   "redis://d:4", &set, &four, msg,
                                   sizeof msg), TJ_OK);
  enum { KEYS = 20000 };
  int per[3] = {0}, moved = 0;
  for (int i = 0; i < KEYS; i++) {
    char key[TJ__KEY_HEX];
    tj__hash_hex(&i, sizeof i, key);
    int a = tj__remote_server_of(three, key), b = tj__remote_server_of(four, key);
    per[a]++;
    if (a != b) {
      moved++;
      ck_assert_int_eq(b, 3); /* a key moves only to the new server */
    }
  }
  printf("remote: 3 servers hold %d/%d/%d of %d keys; adding a fourth "
         "moves %.1f%% (ideal 25%%)\n", per[0], per[1], per[2], KEYS,
         100.0 * moved / KEYS);
  for (int s = 0; s < 3; s++)
    ck_assert_int_gt(per[s], KEYS / 4);
  ck_assert_int_gt(moved, KEYS / 5);
  ck_assert_int_lt(moved, KEYS * 3 / 10);
  tj__remote_close(three);
  tj__remote_close(four);
}
END_TEST

START_TEST(specs_that_do_not_parse_are_refused)
{
  static const char *const bad[] = {
      "", "http://a:1", "redis://a", "redis://a:0", "redis://a:65536",
      "redis://:1", "redis://a:1x", "redis://a:1,", "redis://a:1?rw",
      "redis://a:1,redis://a:1", "redis://a b:1", "redis://[::1]1",
      "redis://a:1/x", "redis://a:1/99999999", "redis://u@a:1",
      "redis://u:@a:1", "unix://relative.sock", "unix://", "redis://a:1?db=",
      "redis://a:1?prefix=a b", "redis://a:1?readonly&", "redis://a:1?x=1"};
  tj__remote_settings set;
  char why[256], msg[256];
  tj__remote_settings_env(&set, why, sizeof why);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tj__remote *r = NULL;
    int rc = tj__remote_open(bad[i], &set, &r, msg, sizeof msg);
    ck_assert_msg(rc == TJ_EINVAL && !r && msg[0], "'%s': %d", bad[i], rc);
  }
  tj__remote *r = NULL;
  ck_assert_int_eq(tj__remote_open("redis://[::1]:7,redis://h.example:9?readonly",
                                   &set, &r, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(tj__remote_server_count(r), 2);
  ck_assert(tj__remote_readonly(r));
  tj__remote_close(r);
  ck_assert_int_eq(tj__remote_open("redis://me:pw@a:1/2?prefix=t:,redis://:pw"
                                   "@b:2?db=3&readonly,unix:///run/r.sock?"
                                   "prefix=x", &set, &r, msg, sizeof msg),
                   TJ_OK);
  ck_assert_int_eq(tj__remote_server_count(r), 3);
  ck_assert(tj__remote_readonly(r));
  tj__remote_close(r);
  /* A refused entry is quoted without its password. */
  ck_assert_int_eq(tj__remote_open("redis://me:sekrit@a:0", &set, &r, msg,
                                   sizeof msg), TJ_EINVAL);
  ck_assert_msg(!strstr(msg, "sekrit") && strstr(msg, "***@a:0"), "%s", msg);
  /* From tj_options: refused; from the environment: a warning. */
  char *dir = test_tmpdir(), *cache = test_path(dir, "c.db");
  tj_runtime *rt = open_remote(cache, "http://nowhere:1");
  ck_assert_ptr_null(rt);
  setenv("TOKITAI_JIT_REMOTE", "http://nowhere:1", 1);
  rt = open_remote(cache, NULL);
  ck_assert_ptr_nonnull(rt);
  ck_assert_msg(strstr(tj_errmsg(rt), "TOKITAI_JIT_REMOTE"), "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
  unsetenv("TOKITAI_JIT_REMOTE");
  free(cache);
  free(dir);
}
END_TEST

/* Seal a value again after a change: its last 8 bytes are XXH3-64 of the
 * rest, little-endian. */
static void reseal(unsigned char *b, size_t len)
{
  uint64_t h = XXH3_64bits(b, len - 8);
  for (int i = 0; i < 8; i++)
    b[len - 8 + i] = (unsigned char)(h >> (8 * i));
}

/* Every field a reader asks for is checked: change any byte of a value
 * and it is refused. */
START_TEST(a_value_with_any_byte_changed_is_refused)
{
  static const unsigned char code[] = "\177ELF not really, but hashed";
  tj__cache_row row = {"0123456789abcdef0123456789abcdef", "add_i32",
                       TEST_ARCH, TJ__PLATFORM, "compiler 1", "-O3", code,
                       sizeof code, 12.5, "", NULL};
  size_t len;
  unsigned char *b = tj__remote_encode(&row, &len);
  tj__remote_value v;
  ck_assert_int_eq(tj__remote_decode(b, len, &row, &v), 0);
  ck_assert_mem_eq(v.code, code, sizeof code);
  ck_assert_str_eq(v.kernel, "add_i32");
  tj__found_free(&v);
  for (size_t i = 0; i < len; i++) {
    b[i] ^= 0x01;
    ck_assert_msg(tj__remote_decode(b, len, &row, &v) == -1, "byte %zu", i);
    b[i] ^= 0x01;
  }
  for (size_t cut = 0; cut < len; cut++)
    ck_assert_int_eq(tj__remote_decode(b, cut, &row, &v), -1);
  unsigned char *longer = malloc(len + 1);
  memcpy(longer, b, len);
  longer[len] = 0;
  ck_assert_int_eq(tj__remote_decode(longer, len + 1, &row, &v), -1);
  /* Changed and sealed again (the last 8 bytes check the rest): the
   * code's hash and the fields asked for still refuse it. */
  b[len - 9] ^= 0x01;
  reseal(b, len);
  ck_assert_int_eq(tj__remote_decode(b, len, &row, &v), -1);
  b[len - 9] ^= 0x01;
  unsigned char *arch = memmem(b, len, TEST_ARCH, strlen(TEST_ARCH));
  ck_assert_ptr_nonnull(arch);
  arch[1] ^= 0x01;
  reseal(b, len);
  ck_assert_int_eq(tj__remote_decode(b, len, &row, &v), -1);
  arch[1] ^= 0x01;
  reseal(b, len);
  ck_assert_int_eq(tj__remote_decode(b, len, &row, &v), 0);
  tj__found_free(&v);
  /* Asked for another compiler, or another key: refused whole. */
  tj__cache_row other = row;
  other.compiler = "compiler 2";
  ck_assert_int_eq(tj__remote_decode(b, len, &other, &v), -1);
  other = row;
  other.key = "0123456789abcdef0123456789abcdee";
  ck_assert_int_eq(tj__remote_decode(b, len, &other, &v), -1);
  free(longer);
  free(b);
}
END_TEST

/* ------------------------------------------------------- the herd */

/* MAX_SERVERS servers started in dir, a herd of n processes (each its own
 * cache) asking for what through them, run to the end; then every process
 * must have succeeded with no remote error, timeout or drop, and no lease
 * may be left.  *spec (malloc'd) names the servers; returns the code
 * values in the tier. */
static long long herd_on_servers(herd *h, redis_server *s, const char *dir,
                                 char **spec, int n, int what)
{
  for (int i = 0; i < MAX_SERVERS; i++)
    start_server(&s[i], dir);
  *spec = spec_of(s, MAX_SERVERS, "");
  herd_start(h, n, dir, *spec, 0, what);
  herd_go(h);
  herd_wait(h);
  long long values = keys_matching(s, MAX_SERVERS, "tokitai-jit:v1:code:*");
  ck_assert_int_eq(h->ok, n);
  ck_assert_uint_eq(h->errors + h->timeouts + h->drops, 0);
  ck_assert_int_eq(keys_matching(s, MAX_SERVERS, "tokitai-jit:v1:lease:*"), 0);
  for (int i = 0; i < n; i++)
    ck_assert_msg(!h->got[i].msg[0], "process %d: %s", i, h->got[i].msg);
  return values;
}

START_TEST(a_cluster_compiles_each_key_once)
{
  char *dir = test_tmpdir(), *spec;
  redis_server s[MAX_SERVERS];
  herd h;
  long long values = herd_on_servers(&h, s, dir, &spec, PROCS, ADD_AND_USER);
  printf("remote: %d processes, own caches, %d servers: %d succeeded, %llu "
         "compiles, %llu remote hits; %lld values\n", PROCS, MAX_SERVERS,
         h.ok, (unsigned long long)h.compiles,
         (unsigned long long)h.remote_hits, values);
  ck_assert_uint_eq(h.compiles, 2); /* add_i32 and remote_k, once each */
  ck_assert_uint_eq(h.remote_hits, 2 * (PROCS - 1));
  ck_assert_int_eq(values, 2);
  /* Each runtime left its counters in its cache, for --stats. */
  uint64_t kept_hits = 0, kept_misses = 0, kept_in = 0;
  for (int i = 0; i < PROCS; i++) {
    char name[32];
    snprintf(name, sizeof name, "c%d.db", i);
    char *path = test_path(dir, name);
    tj_cache *c = NULL;
    tj_cache_stats cs;
    ck_assert_int_eq(tj_cache_open(&c, path, TJ_CACHE_READONLY), TJ_OK);
    ck_assert_int_eq(tj_cache_get_stats(c, &cs), TJ_OK);
    kept_hits += cs.remote_hits;
    kept_misses += cs.remote_misses;
    kept_in += cs.remote_bytes_in;
    ck_assert_uint_eq(cs.remote_hits, h.got[i].st.remote_hits);
    /* --stats says remote hits are among the file's hits: each load
     * recorded on the row copied up. */
    ck_assert_uint_ge(cs.hits, cs.remote_hits);
    ck_assert_uint_eq(cs.remote_bytes_out, h.got[i].st.remote_bytes_out);
    tj_cache_close(c);
    free(path);
  }
  ck_assert_uint_eq(kept_hits, 2 * (PROCS - 1));
  ck_assert_uint_ge(kept_misses, 2);
  ck_assert_uint_gt(kept_in, 0);
  /* A hit was copied into the per-user cache: a new runtime there needs
   * neither the compiler nor the remote. */
  char *c0 = test_path(dir, "c1.db");
  tj_runtime *rt = open_remote(c0, spec);
  tj_kernel *k;
  tj_stats st;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.cache_hits, 1);
  ck_assert_uint_eq(st.compiles + st.remote_hits + st.remote_misses, 0);
  tj_runtime_close(rt);
  for (int i = 0; i < MAX_SERVERS; i++)
    stop_server(&s[i]);
  free(c0);
  free(spec);
  free(dir);
}
END_TEST

/* Machines each asking for another entry of one kernels/ file: the
 * compile is leased under the file's key, and stores and publishes every
 * entry of the file, so the cluster compiles the file once and every
 * other machine takes its own entry's value from the tier. */
START_TEST(a_cluster_compiles_each_file_once)
{
  enum { N = 12 };
  char *dir = test_tmpdir(), *spec;
  redis_server s[MAX_SERVERS];
  herd h;
  long long values = herd_on_servers(&h, s, dir, &spec, N, GELU_FILE);
  printf("remote: %d processes asking for the 3 entries of gelu_f16.hip: "
         "%d succeeded, %llu compiles, %llu remote hits; %lld values\n", N,
         h.ok, (unsigned long long)h.compiles,
         (unsigned long long)h.remote_hits, values);
  ck_assert_uint_eq(h.compiles, 1);
  ck_assert_uint_eq(h.remote_hits, N - 1);
  ck_assert_int_eq(values, 3);
  for (int i = 0; i < MAX_SERVERS; i++)
    stop_server(&s[i]);
  free(spec);
  free(dir);
}
END_TEST

START_TEST(processes_sharing_a_cache_compile_each_key_once)
{
  char *dir = test_tmpdir();
  herd h;
  enum { N = 8 };
  herd_start(&h, N, dir, NULL, 1, ADD_AND_USER);
  herd_go(&h);
  herd_wait(&h);
  printf("remote: %d processes on one per-user cache, no remote: %d "
         "succeeded, %llu compiles\n", N, h.ok, (unsigned long long)h.compiles);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 2);
  for (int i = 0; i < N; i++)
    ck_assert_msg(!h.got[i].msg[0], "process %d: %s", i, h.got[i].msg);
  free(dir);
}
END_TEST

START_TEST(a_server_killed_mid_run_costs_only_compiles)
{
  char *dir = test_tmpdir();
  redis_server s[2];
  for (int i = 0; i < 2; i++)
    start_server(&s[i], dir);
  char *spec = spec_of(s, 2, "");
  herd h;
  herd_start(&h, PROCS, dir, spec, 0, ADD);
  herd_go(&h);
  /* Kill both once a lease shows that a compile is under way. */
  int seen = 0;
  for (int i = 0; i < 3000 && !seen; i++) {
    seen = keys_matching(s, 2, "tokitai-jit:v1:lease:*") > 0;
    if (!seen)
      sleep_ms(2);
  }
  for (int i = 0; i < 2; i++)
    stop_server(&s[i]);
  herd_wait(&h);
  printf("remote: servers killed %s: %d of %d succeeded, %llu compiles, "
         "%llu errors, %llu timeouts\n", seen ? "while a lease was held" :
         "(no lease seen)", h.ok, PROCS, (unsigned long long)h.compiles,
         (unsigned long long)h.errors, (unsigned long long)h.timeouts);
  ck_assert_int_eq(h.ok, PROCS);
  ck_assert_uint_ge(h.compiles, 1);
  ck_assert_uint_ge(h.errors + h.timeouts, 1);
  for (int i = 0; i < PROCS; i++) /* off once, and said once */
    ck_assert_uint_le(h.got[i].st.remote_errors + h.got[i].st.remote_timeouts, 1);
  free(spec);
  free(dir);
}
END_TEST

/* Two standalone shards, one killed: its keys answer at once as the
 * tier off after one fault, the other shard's keys are still written and
 * read, by this remote and by another. */
START_TEST(a_dead_shard_turns_off_its_keys_only)
{
  char *dir = test_tmpdir();
  redis_server s[2];
  for (int i = 0; i < 2; i++)
    start_server(&s[i], dir);
  char *spec = spec_of(s, 2, "");
  tj__remote_settings set;
  char why[256], msg[512];
  tj__remote_settings_env(&set, why, sizeof why);
  tj__remote *r, *other;
  ck_assert_int_eq(tj__remote_open(spec, &set, &r, msg, sizeof msg), TJ_OK);
  ck_assert_int_eq(tj__remote_open(spec, &set, &other, msg, sizeof msg),
                   TJ_OK);
  char key[2][TJ__KEY_HEX];
  int have[2] = {0, 0};
  for (int i = 0; !(have[0] && have[1]); i++) {
    char k[TJ__KEY_HEX];
    tj__hash_hex(&i, sizeof i, k);
    int at = tj__remote_server_of(r, k);
    if (!have[at])
      memcpy(key[at], k, sizeof k), have[at] = 1;
  }
  stop_server(&s[0]);
  static const unsigned char code[] = "\177ELF shard code";
  tj__cache_row row = {key[0], "add_i32", TEST_ARCH, TJ__PLATFORM,
                       "compiler 1", "-O3", code, sizeof code, 1.5, "", NULL};
  tj__remote_value v;
  int rejected;
  ck_assert_int_eq(tj__remote_get(r, &row, &v, &rejected), TJ_EIO);
  ck_assert_int_eq(tj__remote_get(r, &row, &v, &rejected), TJ_EIO);
  ck_assert_int_eq(tj__remote_off(r), 1);
  row.key = key[1];
  ck_assert_int_eq(tj__remote_put(r, &row), TJ_OK);
  ck_assert_int_eq(tj__remote_get(r, &row, &v, &rejected), TJ_OK);
  tj__found_free(&v);
  ck_assert_int_eq(tj__remote_get(other, &row, &v, &rejected), TJ_OK);
  ck_assert_mem_eq(v.code, code, sizeof code);
  tj__found_free(&v);
  tj__remote_counters n;
  tj__remote_get_counters(r, &n);
  ck_assert_uint_eq(n.openings, 1);
  ck_assert_uint_eq(n.errors + n.timeouts, 1);
  ck_assert_uint_eq(n.hits, 1);
  tj__remote_close(r);
  tj__remote_close(other);
  stop_server(&s[1]);
  free(spec);
  free(dir);
}
END_TEST

/* A server that accepts connections (the kernel does, into the listen
 * backlog) and never answers: each process waits out one operation
 * timeout, turns the tier off and compiles.  A redis-server stopped
 * before the run is this to a client; one stopped mid-run is the case
 * after it. */
START_TEST(a_server_that_never_answers_is_given_up)
{
  char *dir = test_tmpdir();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t n = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(fd, 128), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  char spec[64];
  snprintf(spec, sizeof spec, "redis://127.0.0.1:%d", ntohs(a.sin_port));
  setenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS", "200", 1);
  enum { N = 8 };
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  herd_go(&h);
  herd_wait(&h);
  unsetenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS");
  close(fd);
  printf("remote: a silent server: %d of %d succeeded, %llu compiles, %llu "
         "timeouts\n", h.ok, N, (unsigned long long)h.compiles,
         (unsigned long long)h.timeouts);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, N);
  for (int i = 0; i < N; i++) {
    ck_assert_uint_eq(h.got[i].st.remote_timeouts, 1);
    ck_assert_uint_eq(h.got[i].st.remote_errors, 0);
    ck_assert_msg(strstr(h.got[i].msg, "did not answer in time"), "%s",
                  h.got[i].msg);
  }
  free(dir);
}
END_TEST

/* The pid of the process that holds a lease on s (its token is
 * "PID-NONCE"), 0 when none is held; *value set when a value is there. */
static pid_t lease_holder(const redis_server *s, int *value)
{
  redisReply *keys = ask(s, "KEYS " TJ__REMOTE_NAMESPACE "*");
  pid_t pid = 0;
  *value = 0;
  for (size_t i = 0; i < keys->elements; i++) {
    const char *name = keys->element[i]->str;
    if (strncmp(name, TJ__REMOTE_NAMESPACE "code:",
                strlen(TJ__REMOTE_NAMESPACE "code:")) == 0) {
      *value = 1;
      continue;
    }
    redisReply *v = ask(s, "GET %s", name);
    if (v->type == REDIS_REPLY_STRING) /* else it expired meanwhile */
      pid = (pid_t)strtol(v->str, NULL, 10);
    freeReplyObject(v);
  }
  freeReplyObject(keys);
  return pid;
}

/* A real server that answered at first and then stops (kill -STOP: a
 * stalled host, a paused VM) while one process holds the compile lease,
 * the others poll it, and late ones connect.  Each process meets the
 * silence at most once: one operation timeout, the tier off with one
 * warning, and it compiles here.  Nobody waits on the lease: its bound
 * is an hour here, so a process that did would outlast the case's
 * timeout.  Then the server resumes, serves a new process, and shuts
 * down as usual. */
START_TEST(a_server_stopped_while_a_lease_is_held_costs_one_timeout)
{
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  setenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS", "200", 1);
  setenv("TOKITAI_JIT_LEASE_WAIT_MS", "3600000", 1);
  herd h;
  herd_start(&h, PROCS, dir, spec, 0, ADD);
  unsetenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS");
  unsetenv("TOKITAI_JIT_LEASE_WAIT_MS");
  herd_go(&h);
  /* Stop it once a lease shows that a compile is under way; a value
   * there first means the compile ended between two looks. */
  pid_t holder = 0;
  int value = 0;
  for (int i = 0; i < 20000 && !holder && !value; i++) {
    holder = lease_holder(&s, &value);
    if (!holder && !value)
      sleep_ms(1);
  }
  ck_assert_msg(holder > 0, "no lease seen (%s)",
                value ? "the value came first" : "nothing happened");
  pause_server(&s);
  herd_wait(&h);
  int met = 0, held = -1;
  for (int i = 0; i < PROCS; i++) {
    const report *r = &h.got[i];
    if (h.pids[i] == holder)
      held = i;
    ck_assert_uint_eq(r->st.remote_errors, 0);
    ck_assert_uint_le(r->st.remote_timeouts, 1);
    ck_assert_uint_eq(r->st.compiles + r->st.remote_hits, 1);
    if (r->st.remote_timeouts) { /* no hit after it: compiled here */
      met++;
      ck_assert_uint_eq(r->st.compiles, 1);
      ck_assert_msg(strstr(r->msg, "did not answer in time"),
                    "process %d: '%s'", i, r->msg);
    } else {
      ck_assert_msg(!r->msg[0], "process %d: '%s'", i, r->msg);
    }
  }
  printf("remote: a server stopped while process %d held the lease: %d of "
         "%d succeeded, %d met the silence, %llu compiles, %llu remote "
         "hits\n", held, h.ok, PROCS, met, (unsigned long long)h.compiles,
         (unsigned long long)h.remote_hits);
  ck_assert_int_eq(h.ok, PROCS);
  ck_assert_int_ge(held, 0);
  ck_assert_uint_eq(h.got[held].st.compiles, 1);
  ck_assert_int_ge(met, 1);
  /* Resumed, it answers a new process: the tier is off only for the
   * processes that met the silence. */
  resume_server(&s);
  char *late = test_path(dir, "late.db");
  tj_runtime *rt = open_remote(late, spec);
  tj_kernel *k;
  tj_stats st;
  ck_assert_ptr_nonnull(rt);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_msg(!tj_errmsg(rt)[0], "%s", tj_errmsg(rt));
  tj_runtime_close(rt);
  printf("remote: resumed, a new process %s\n",
         st.remote_hits ? "took add_i32 from it" : "compiled add_i32");
  ck_assert_uint_eq(st.remote_errors + st.remote_timeouts, 0);
  ck_assert_uint_eq(st.remote_hits + st.compiles, 1);
  shut_down_server(&s);
  free(late);
  free(spec);
  free(dir);
}
END_TEST

/* The value of add_i32 on s, changed by how; NULL when it has none. */
static void tamper(const redis_server *s, int how, unsigned char *orig,
                   size_t *orig_len)
{
  redisReply *keys = ask(s, "KEYS tokitai-jit:v1:code:*");
  ck_assert_uint_eq(keys->elements, 1);
  char name[128];
  snprintf(name, sizeof name, "%s", keys->element[0]->str);
  freeReplyObject(keys);
  redisReply *v = ask(s, "GET %s", name);
  ck_assert_int_eq(v->type, REDIS_REPLY_STRING);
  size_t len = (size_t)v->len;
  unsigned char *b = malloc(len);
  memcpy(b, v->str, len);
  freeReplyObject(v);
  if (orig) {
    memcpy(orig, b, len);
    *orig_len = len;
  }
  switch (how) {
  case 0: b[len - 9] ^= 0x40; break;              /* a byte of the code */
  case 1: b[8] = 2; break;                          /* the format version */
  case 2: b[16 + 31] ^= 0x01; break;                /* the key echoed */
  case 3: len -= 7; break;                          /* cut short */
  }
  freeReplyObject(ask(s, "SET %s %b", name, b, len));
  free(b);
}

START_TEST(a_tampered_value_is_never_loaded)
{
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  char *first = test_path(dir, "first.db");
  tj_runtime *rt = open_remote(first, spec);
  tj_kernel *k;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_kernel_get_info(k, &info);
  size_t good_len = info.code_size;
  unsigned char *good = malloc(good_len);
  memcpy(good, info.code, good_len);
  tj_runtime_close(rt);
  static unsigned char orig[1 << 20];
  size_t orig_len = 0;
  for (int how = 0; how < 4; how++) {
    tamper(&s, how, how == 0 ? orig : NULL, &orig_len);
    char name[32];
    snprintf(name, sizeof name, "t%d.db", how);
    char *cache = test_path(dir, name);
    tj_stats st;
    rt = open_remote(cache, spec);
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    tj_runtime_get_stats(rt, &st);
    tj_kernel_get_info(k, &info);
    ck_assert_msg(strstr(tj_errmsg(rt), "failed its checks"), "%s", tj_errmsg(rt));
    ck_assert_uint_eq(st.compiles, 1);
    ck_assert_uint_eq(st.remote_hits, 0);
    ck_assert_uint_ge(st.cache_drops, 1);
    ck_assert_uint_eq(st.remote_errors + st.remote_timeouts, 0);
    ck_assert_int_eq(info.origin, TJ_FROM_COMPILER);
    ck_assert_uint_eq(info.code_size, good_len);
    ck_assert_mem_eq(info.code, good, good_len);
    tj_runtime_close(rt);
    /* The compile mended the value: whole again (its compile time
     * aside, the same bytes). */
    redisReply *v = ask(&s, "KEYS tokitai-jit:v1:code:*");
    redisReply *val = ask(&s, "GET %s", v->element[0]->str);
    ck_assert_uint_eq((size_t)val->len, orig_len);
    ck_assert_mem_eq(val->str + orig_len - 8 - good_len, good, good_len);
    freeReplyObject(val);
    freeReplyObject(v);
    free(cache);
  }
  /* And then it is a hit again. */
  char *last = test_path(dir, "last.db");
  tj_stats st;
  rt = open_remote(last, spec);
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.remote_hits, 1);
  ck_assert_uint_eq(st.cache_hits, 1); /* the same load: among cache_hits */
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  stop_server(&s);
  free(last);
  free(good);
  free(first);
  free(spec);
  free(dir);
}
END_TEST

START_TEST(a_read_only_client_writes_nothing)
{
  char *dir = test_tmpdir();
  redis_server s[2];
  for (int i = 0; i < 2; i++)
    start_server(&s[i], dir);
  for (int way = 0; way < 2; way++) {
    char *spec = spec_of(s, 2, way ? "" : "?readonly"), name[32];
    if (way)
      setenv("TOKITAI_JIT_REMOTE_READONLY", "1", 1);
    snprintf(name, sizeof name, "ro%d.db", way);
    char *cache = test_path(dir, name);
    tj_runtime *rt = open_remote(cache, spec);
    tj_kernel *k;
    tj_stats st;
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    ck_assert_int_eq(tj_kernel_compile(rt, user_source, "remote_k", NULL, &k),
                     TJ_OK);
    tj_runtime_get_stats(rt, &st);
    tj_runtime_close(rt);
    unsetenv("TOKITAI_JIT_REMOTE_READONLY");
    ck_assert_uint_eq(st.compiles, 2);
    ck_assert_uint_ge(st.remote_misses, 2);
    for (int i = 0; i < 2; i++) {
      redisReply *r = ask(&s[i], "DBSIZE");
      ck_assert_int_eq(r->integer, 0);
      freeReplyObject(r);
    }
    free(cache);
    free(spec);
  }
  for (int i = 0; i < 2; i++)
    stop_server(&s[i]);
  free(dir);
}
END_TEST

/* ------------------------------------------------------- faults */

/* How a scripted server answers every command it is sent. */
enum { TRICKLE, ENDLESS, WRONG_TYPE, HUGE_ARRAY, TWO_ANSWERS };

static void fake_answer(int fd, int how)
{
  static const char trickle[] = "$0\r\n\r\n";
  static const char wrong[] = "$5\r\nhello\r\n";
  static const char huge[] = "*2147483647\r\n";
  static const char two[] = "$0\r\n\r\n*2147483647\r\n";
  switch (how) {
  case TRICKLE: /* a whole answer, a byte each 100 ms */
    for (size_t i = 0; i < sizeof trickle - 1; i++) {
      if (send(fd, trickle + i, 1, MSG_NOSIGNAL) != 1)
        return;
      sleep_ms(100);
    }
    return;
  case ENDLESS: /* a long answer that never ends */
    if (send(fd, "$100000\r\n", 9, MSG_NOSIGNAL) != 9)
      return;
    while (send(fd, "x", 1, MSG_NOSIGNAL) == 1)
      sleep_ms(20);
    return;
  case WRONG_TYPE: /* a string, whatever was asked */
    (void)!send(fd, wrong, sizeof wrong - 1, MSG_NOSIGNAL);
    return;
  case HUGE_ARRAY: /* an array header claiming 2^31 elements */
    (void)!send(fd, huge, sizeof huge - 1, MSG_NOSIGNAL);
    return;
  default: /* an answer, and that header after it */
    (void)!send(fd, two, sizeof two - 1, MSG_NOSIGNAL);
    return;
  }
}

/* A child serving how on a loopback port (returned), one connection at a
 * time, until killed. */
static int fake_server(int how, pid_t *pid)
{
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t n = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(fd, 16), 0);
  ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &n), 0);
  pid_t test = getpid();
  *pid = fork();
  ck_assert_int_ge(*pid, 0);
  if (*pid == 0) {
    die_with(test);
    for (;;) {
      int c = accept(fd, NULL, NULL);
      char buf[4096];
      while (c >= 0 && recv(c, buf, sizeof buf, 0) > 0)
        fake_answer(c, how);
      if (c >= 0)
        close(c);
    }
  }
  close(fd);
  return ntohs(a.sin_port);
}

/* A server that trickles an answer, one that never ends it, one that
 * answers a type the command does not return, one that claims 2^31
 * elements, one that sends more than one answer: each costs one command's deadline at most, is counted, turns
 * the tier off with a warning that says why, and the kernel is compiled.
 * The lease wait is an hour: a process that took a wrong answer for a
 * busy lease would outlast the case. */
START_TEST(slow_or_odd_servers_cost_one_deadline)
{
  static const char *const said[] = {"did not answer in time",
                                     "did not answer in time", "wrong type",
                                     "wrong type", "more than one answer"};
  char *dir = test_tmpdir();
  setenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS", "300", 1);
  setenv("TOKITAI_JIT_LEASE_WAIT_MS", "3600000", 1);
  for (int how = TRICKLE; how <= TWO_ANSWERS; how++) {
    pid_t pid;
    char spec[64], name[32];
    snprintf(spec, sizeof spec, "redis://127.0.0.1:%d", fake_server(how, &pid));
    snprintf(name, sizeof name, "f%d.db", how);
    char *cache = test_path(dir, name);
    tj_runtime *rt = open_remote(cache, spec);
    tj_kernel *k;
    tj_stats st;
    ck_assert_ptr_nonnull(rt);
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    tj_runtime_get_stats(rt, &st);
    printf("remote: a server that answers %d: %llu timeouts, %llu errors, "
           "'%s'\n", how, (unsigned long long)st.remote_timeouts,
           (unsigned long long)st.remote_errors, tj_errmsg(rt));
    ck_assert_uint_eq(st.compiles, 1);
    ck_assert_uint_eq(st.remote_timeouts, how <= ENDLESS);
    ck_assert_uint_eq(st.remote_errors, how > ENDLESS);
    ck_assert_uint_eq(st.remote_breaker_openings, 1);
    ck_assert_int_eq(st.remote_state, TJ_REMOTE_OFF);
    ck_assert_msg(strstr(tj_errmsg(rt), said[how]), "%s", tj_errmsg(rt));
    tj_runtime_close(rt);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    free(cache);
  }
  unsetenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS");
  unsetenv("TOKITAI_JIT_LEASE_WAIT_MS");
  free(dir);
}
END_TEST

/* A lease shorter than a compile: the holder renews it (every third of
 * the lease) while it compiles, so the others wait and take the value.
 * A compile shorter than two renewal periods need not renew; the one
 * compile must hold either way. */
START_TEST(a_lease_shorter_than_a_compile_is_renewed)
{
  enum { N = 8 };
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  setenv("TOKITAI_JIT_REMOTE_LEASE_MS", "200", 1);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  unsetenv("TOKITAI_JIT_REMOTE_LEASE_MS");
  herd_go(&h);
  herd_wait(&h);
  printf("remote: a 200 ms lease, %d processes: %llu compiles (%.0f ms), "
         "%llu renewals, %llu remote hits\n", N,
         (unsigned long long)h.compiles, h.compile_ms,
         (unsigned long long)h.renewals, (unsigned long long)h.remote_hits);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 1);
  ck_assert_uint_eq(h.remote_hits, N - 1);
  if (h.compile_ms > 2 * 200.0 / 3)
    ck_assert_uint_ge(h.renewals, 1);
  ck_assert_uint_eq(h.errors + h.timeouts + h.takeovers, 0);
  stop_server(&s);
  free(spec);
  free(dir);
}
END_TEST

/* A damaged value met by a herd: every process rejects it, one takes the
 * lease and replaces it, the others wait for the replacement. */
START_TEST(a_damaged_value_is_replaced_by_one_compile)
{
  enum { N = 8 };
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  char *first = test_path(dir, "first.db");
  tj_runtime *rt = open_remote(first, spec);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  tamper(&s, 0, NULL, NULL);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  herd_go(&h);
  herd_wait(&h);
  printf("remote: a damaged value, %d processes: %llu compiles, %llu "
         "drops, %llu remote hits\n", N, (unsigned long long)h.compiles,
         (unsigned long long)h.drops, (unsigned long long)h.remote_hits);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 1);
  ck_assert_uint_eq(h.remote_hits, N - 1);
  ck_assert_uint_ge(h.drops, N);
  ck_assert_uint_eq(h.errors + h.timeouts, 0);
  ck_assert_int_eq(keys_matching(&s, 1, "tokitai-jit:v1:lease:*"), 0);
  stop_server(&s);
  free(first);
  free(spec);
  free(dir);
}
END_TEST

/* add_i32's key (its file holds it alone: the key its lease goes by). */
static void key_of_add(const char *dir, char key[TJ__KEY_HEX])
{
  char *cache = test_path(dir, "key.db");
  tj_runtime *rt = open_remote(cache, NULL);
  tj_kernel *k;
  tj_kernel_info info;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  ck_assert_int_eq(tj_kernel_get_info(k, &info), TJ_OK);
  snprintf(key, TJ__KEY_HEX, "%s", info.key);
  tj_runtime_close(rt);
  free(cache);
}

/* A holder that stops (its lease kept alive, no value coming) past the
 * lease wait: one waiter takes the lease over and compiles, not all. */
START_TEST(one_waiter_takes_over_a_stuck_lease)
{
  enum { N = 8 };
  char *dir = test_tmpdir(), key[TJ__KEY_HEX];
  key_of_add(dir, key);
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  freeReplyObject(ask(&s, "SET " TJ__REMOTE_NAMESPACE "lease:%s 1-stuck PX "
                      "600000", key));
  setenv("TOKITAI_JIT_LEASE_WAIT_MS", "2000", 1);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  unsetenv("TOKITAI_JIT_LEASE_WAIT_MS");
  herd_go(&h);
  herd_wait(&h);
  printf("remote: a stuck lease, %d processes: %llu compiles, %llu "
         "takeovers, %llu remote hits\n", N, (unsigned long long)h.compiles,
         (unsigned long long)h.takeovers, (unsigned long long)h.remote_hits);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 1);
  ck_assert_uint_eq(h.takeovers, 1);
  ck_assert_uint_eq(h.remote_hits, N - 1);
  stop_server(&s);
  free(spec);
  free(dir);
}
END_TEST

/* The same with one shared per-user cache, the holder a process of this
 * machine that holds the cache's lease and stopped. */
START_TEST(one_waiter_takes_over_a_stuck_local_lease)
{
  enum { N = 6 };
  char *dir = test_tmpdir(), key[TJ__KEY_HEX];
  key_of_add(dir, key);
  char *cache = test_path(dir, "c0.db");
  tj_runtime *rt = open_remote(cache, NULL); /* makes the file and lock */
  tj_runtime_close(rt);
  int waited, fd = tj__lease_take(cache, 0, key, 0, &waited);
  ck_assert_int_ge(fd, 0);
  setenv("TOKITAI_JIT_LEASE_WAIT_MS", "1000", 1);
  herd h;
  herd_start(&h, N, dir, NULL, 1, ADD);
  unsetenv("TOKITAI_JIT_LEASE_WAIT_MS");
  herd_go(&h);
  herd_wait(&h);
  tj__lease_release(fd);
  printf("remote: a stuck local lease, %d processes on one cache: %llu "
         "compiles\n", N, (unsigned long long)h.compiles);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 1);
  free(cache);
  free(dir);
}
END_TEST

/* A server that closes idle connections (its `timeout` setting, as
 * operators set it) costs the tier nothing: the next command goes again
 * on a new connection, no fault is counted and the tier stays on. */
START_TEST(an_idle_connection_the_server_closed_costs_no_fault)
{
  static const char *const sources[] = {
      "extern \"C\" __global__ void idle_k(int *p) { p[0] = 5; }",
      "extern \"C\" __global__ void idle_k(int *p) { p[0] = 6; }"};
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  char *mine = test_path(dir, "idle.db");
  tj_runtime *rt = open_remote(mine, spec);
  tj_kernel *k;
  tj_stats st;
  ck_assert_int_eq(tj_kernel_compile(rt, sources[0], "idle_k", NULL, &k),
                   TJ_OK);
  redisReply *r = ask(&s, "CONFIG SET timeout 1");
  ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  /* The server checks idle clients about ten times a second: 2.5 s
   * leave it time to close ours. */
  sleep_ms(2500);
  /* Only the test's own connection is left. */
  r = ask(&s, "CLIENT LIST");
  ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
  int lines = 0;
  for (const char *p = r->str; *p; p++)
    lines += *p == '\n';
  ck_assert_msg(lines == 1, "%s", r->str);
  freeReplyObject(r);
  ck_assert_int_eq(tj_kernel_compile(rt, sources[1], "idle_k", NULL, &k),
                   TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.remote_errors, 0);
  ck_assert_uint_eq(st.remote_timeouts, 0);
  ck_assert_uint_eq(st.remote_breaker_openings, 0);
  ck_assert_int_eq(st.remote_state, TJ_REMOTE_ON);
  tj_runtime_close(rt);
  /* And what it compiled after the close reached the server. */
  char *other = test_path(dir, "other.db");
  rt = open_remote(other, spec);
  ck_assert_int_eq(tj_kernel_compile(rt, sources[1], "idle_k", NULL, &k),
                   TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.remote_hits, 1);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  stop_server(&s);
  free(other);
  free(mine);
  free(spec);
  free(dir);
}
END_TEST

static void restart_server(redis_server *s, const char *dir)
{
  start_server_at(s, dir, s->port);
}

/* One long-lived process: the server stalls (1.5 s), then restarts
 * empty.  Each fault turns the tier off for a while, the kernel compiled
 * meanwhile waits, and once the server answers again the tier's thread
 * publishes it, which turns the tier on: another process takes the value
 * from there. */
START_TEST(the_tier_comes_back_after_a_stall_and_a_restart)
{
  static const char *const sources[] = {
      "extern \"C\" __global__ void stall_k(int *p) { p[0] = 1; }",
      "extern \"C\" __global__ void restart_k(int *p) { p[0] = 2; }"};
  static const char *const probes[] = {
      "extern \"C\" __global__ void probe_k(int *p) { p[0] = 3; }",
      "extern \"C\" __global__ void probe_k(int *p) { p[0] = 4; }"};
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  setenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS", "200", 1);
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "50", 1);
  char *mine = test_path(dir, "long.db");
  tj_runtime *rt = open_remote(mine, spec);
  tj_kernel *k;
  tj_stats st;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  for (int fault = 0; fault < 2; fault++) {
    if (fault == 0)
      pause_server(&s);
    else
      stop_server(&s);
    ck_assert_int_eq(tj_kernel_compile(rt, sources[fault], fault ? "restart_k"
                                       : "stall_k", NULL, &k), TJ_OK);
    ck_assert_msg(strstr(tj_errmsg(rt), "off for a while"), "%s",
                  tj_errmsg(rt));
    if (fault == 0) {
      sleep_ms(1500);
      resume_server(&s);
    } else {
      restart_server(&s, dir);
    }
    /* The tier's thread publishes the value once its backoff passes:
     * the tier is on again without another call. */
    for (int i = 0; i < 1000; i++) {
      tj_runtime_get_stats(rt, &st);
      if (st.remote_published_late == (uint64_t)fault + 1)
        break;
      sleep_ms(10);
    }
    ck_assert_uint_eq(st.remote_published_late, (uint64_t)fault + 1);
    ck_assert_int_eq(st.remote_state, TJ_REMOTE_ON);
    uint64_t before = st.remote_hits + st.remote_misses;
    ck_assert_int_eq(tj_kernel_compile(rt, probes[fault], "probe_k", NULL,
                                       &k), TJ_OK);
    tj_runtime_get_stats(rt, &st);
    ck_assert_uint_gt(st.remote_hits + st.remote_misses, before);
    ck_assert_msg(strstr(tj_errmsg(rt), "on again"), "%s", tj_errmsg(rt));
    ck_assert_int_eq(st.remote_state, TJ_REMOTE_ON);
    ck_assert_uint_eq(st.remote_published_late, (uint64_t)fault + 1);
  }
  printf("remote: a stall and a restart: %llu openings, %llu timeouts, "
         "%llu errors, %llu published late\n",
         (unsigned long long)st.remote_breaker_openings,
         (unsigned long long)st.remote_timeouts,
         (unsigned long long)st.remote_errors,
         (unsigned long long)st.remote_published_late);
  ck_assert_uint_eq(st.remote_breaker_openings, 2);
  tj_runtime_close(rt);
  /* --stats reads what the runtime left in its cache. */
  tj_cache *c = NULL;
  tj_cache_stats cs;
  ck_assert_int_eq(tj_cache_open(&c, mine, TJ_CACHE_READONLY), TJ_OK);
  ck_assert_int_eq(tj_cache_get_stats(c, &cs), TJ_OK);
  ck_assert_uint_eq(cs.remote_breaker_openings, 2);
  ck_assert_uint_eq(cs.remote_timeouts, st.remote_timeouts);
  ck_assert_uint_eq(cs.remote_errors, st.remote_errors + st.remote_timeouts);
  ck_assert_uint_eq(cs.remote_off_at_close, 0);
  tj_cache_close(c);
  /* Another machine takes the kernel compiled during the restart. */
  char *other = test_path(dir, "other.db");
  rt = open_remote(other, spec);
  ck_assert_int_eq(tj_kernel_compile(rt, sources[1], "restart_k", NULL, &k),
                   TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.remote_hits, 1);
  ck_assert_uint_eq(st.compiles, 0);
  tj_runtime_close(rt);
  unsetenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS");
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "600000", 1);
  stop_server(&s);
  free(other);
  free(mine);
  free(spec);
  free(dir);
}
END_TEST

/* A herd that meets a 1.5 s stall compiles here and finishes; after it
 * the tier is shared again: a new herd compiles each key at most once. */
START_TEST(sharing_resumes_after_a_stall_mid_herd)
{
  enum { N = 16 };
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  setenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS", "200", 1);
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "100", 1);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  herd_go(&h);
  int value = 0;
  pid_t holder = 0;
  for (int i = 0; i < 20000 && !holder && !value; i++)
    if (!(holder = lease_holder(&s, &value)) && !value)
      sleep_ms(1);
  pause_server(&s);
  sleep_ms(1500);
  resume_server(&s);
  herd_wait(&h);
  ck_assert_int_eq(h.ok, N);
  herd h2;
  char *sub = test_path(dir, "after");
  ck_assert_int_eq(mkdir(sub, 0700), 0);
  herd_start(&h2, N, sub, spec, 0, ADD_AND_USER);
  herd_go(&h2);
  herd_wait(&h2);
  printf("remote: a stall mid-herd: %llu compiles, %llu timeouts; after "
         "it %llu compiles, %llu remote hits\n",
         (unsigned long long)h.compiles, (unsigned long long)h.timeouts,
         (unsigned long long)h2.compiles, (unsigned long long)h2.remote_hits);
  ck_assert_int_eq(h2.ok, N);
  ck_assert_uint_le(h2.compiles, 2);
  ck_assert_uint_ge(h2.remote_hits, 2 * N - 2);
  ck_assert_uint_eq(h2.errors + h2.timeouts, 0);
  unsetenv("TOKITAI_JIT_REMOTE_TIMEOUT_MS");
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "600000", 1);
  stop_server(&s);
  free(sub);
  free(spec);
  free(dir);
}
END_TEST

/* A 1.5 s stall while one of 8 processes holds the lease, with the
 * tier's own deadline and backoff: the waiters ride the fault out
 * instead of compiling, and at most one more compile than the healthy
 * one is made. */
START_TEST(a_stall_mid_compile_costs_at_most_one_compile_more)
{
  enum { N = 8 };
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "1000", 1);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "600000", 1);
  herd_go(&h);
  pid_t holder = 0;
  int value = 0;
  for (int i = 0; i < 20000 && !holder && !value; i++)
    if (!(holder = lease_holder(&s, &value)) && !value)
      sleep_ms(1);
  ck_assert_msg(holder > 0, "no lease seen (%s)",
                value ? "the value came first" : "nothing happened");
  pause_server(&s);
  sleep_ms(1500);
  resume_server(&s);
  herd_wait(&h);
  printf("remote: a 1.5 s stall while a lease was held, %d processes: "
         "%llu compiles, %llu remote hits, %llu timeouts, %llu errors\n", N,
         (unsigned long long)h.compiles, (unsigned long long)h.remote_hits,
         (unsigned long long)h.timeouts, (unsigned long long)h.errors);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_ge(h.timeouts + h.errors, 1); /* the fault was met */
  ck_assert_uint_le(h.compiles, 2);
  ck_assert_uint_eq(h.compiles + h.remote_hits, N);
  stop_server(&s);
  free(spec);
  free(dir);
}
END_TEST

/* How many clients of s sent cmd last. */
static int clients_whose_last_command_is(const redis_server *s,
                                         const char *cmd)
{
  redisReply *r = ask(s, "CLIENT LIST");
  ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
  char want[64];
  snprintf(want, sizeof want, " cmd=%s ", cmd);
  int n = 0;
  for (const char *p = r->str; (p = strstr(p, want)); p += strlen(want))
    n++;
  freeReplyObject(r);
  return n;
}

/* A holder that goes without a value once every waiter has seen it (its
 * lease deleted, as a restart or an eviction would): the waiters give it
 * a renewal period and a little more to take the lease again, then one of
 * them takes it and compiles, and the others wait for that one. */
START_TEST(a_holder_gone_without_its_value_is_followed_by_one_compile)
{
  enum { N = 8 };
  char *dir = test_tmpdir(), key[TJ__KEY_HEX];
  key_of_add(dir, key);
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  freeReplyObject(ask(&s, "SET " TJ__REMOTE_NAMESPACE "lease:%s 1-gone PX "
                      "600000", key));
  setenv("TOKITAI_JIT_REMOTE_LEASE_MS", "3000", 1);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  unsetenv("TOKITAI_JIT_REMOTE_LEASE_MS");
  herd_go(&h);
  int waiting = 0;
  for (int i = 0; i < 60000 && waiting < N; i++)
    if ((waiting = clients_whose_last_command_is(&s, "exists")) < N)
      sleep_ms(2);
  ck_assert_int_eq(waiting, N);
  freeReplyObject(ask(&s, "DEL " TJ__REMOTE_NAMESPACE "lease:%s", key));
  herd_wait(&h);
  printf("remote: a holder gone without its value, %d processes: %llu "
         "compiles, %llu takeovers, %llu remote hits\n", N,
         (unsigned long long)h.compiles, (unsigned long long)h.takeovers,
         (unsigned long long)h.remote_hits);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 1);
  ck_assert_uint_eq(h.takeovers, 1);
  ck_assert_uint_eq(h.remote_hits, N - 1);
  ck_assert_uint_eq(h.errors + h.timeouts, 0);
  stop_server(&s);
  free(spec);
  free(dir);
}
END_TEST

/* A restart, empty, while a compile holds the lease and 8 processes wait
 * on it: the holder takes its lease again at its next renewal, the
 * waiters give it that time instead of taking the lease themselves, and
 * when the holder's value comes they load it: no compile is added.  The
 * holder is this process (its compile ends when the case says, with the
 * value another runtime compiled before), and the restart comes once
 * every waiter has seen it hold the lease, so nothing here hangs on how
 * fast a compile or a process is; the lease (30 s) leaves the holder's
 * renewal (every 10 s) seconds to spare before a waiter would take it. */
START_TEST(a_restart_mid_compile_costs_no_compile_more)
{
  enum { N = 8 };
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  /* add_i32's value, compiled once, taken off the server. */
  char *first = test_path(dir, "first.db");
  tj_runtime *rt = open_remote(first, spec);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  redisReply *keys = ask(&s, "KEYS " TJ__REMOTE_NAMESPACE "code:*");
  ck_assert_uint_eq(keys->elements, 1);
  char code[128], lease[128], key[TJ__KEY_HEX];
  snprintf(code, sizeof code, "%s", keys->element[0]->str);
  const char *hex = code + strlen(TJ__REMOTE_NAMESPACE "code:");
  ck_assert_uint_eq(strlen(hex), sizeof key - 1);
  memcpy(key, hex, sizeof key);
  snprintf(lease, sizeof lease, TJ__REMOTE_NAMESPACE "lease:%s", key);
  freeReplyObject(keys);
  redisReply *val = ask(&s, "GET %s", code);
  ck_assert_int_eq(val->type, REDIS_REPLY_STRING);
  freeReplyObject(ask(&s, "DEL %s", code));
  /* This process holds the lease: its compile is under way. */
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "1000", 1);
  setenv("TOKITAI_JIT_REMOTE_LEASE_MS", "30000", 1);
  setenv("TOKITAI_JIT_LEASE_WAIT_MS", "3600000", 1);
  tj__remote_settings set;
  char why[256], msg[256];
  tj__remote_settings_env(&set, why, sizeof why);
  ck_assert_str_eq(why, "");
  tj__remote *r = NULL;
  ck_assert_int_eq(tj__remote_open(spec, &set, &r, msg, sizeof msg), TJ_OK);
  tj__remote_lease l;
  ck_assert_int_eq(tj__remote_lease_begin(r, key, 3600000, &l), 0);
  ck_assert(l.held);
  herd h;
  herd_start(&h, N, dir, spec, 0, ADD);
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "600000", 1);
  unsetenv("TOKITAI_JIT_REMOTE_LEASE_MS");
  unsetenv("TOKITAI_JIT_LEASE_WAIT_MS");
  herd_go(&h);
  /* Every waiter has seen the lease held (its last look asks whether
   * the value is there yet). */
  int waiting = 0;
  for (int i = 0; i < 60000 && waiting < N; i++)
    if ((waiting = clients_whose_last_command_is(&s, "exists")) < N)
      sleep_ms(2);
  ck_assert_int_eq(waiting, N);
  stop_server(&s);
  restart_server(&s, dir);
  /* The lease shows again: the holder's, not a waiter's. */
  redisReply *t = NULL;
  for (int i = 0; i < 30000; i++) {
    t = ask(&s, "GET %s", lease);
    if (t->type == REDIS_REPLY_STRING)
      break;
    freeReplyObject(t);
    t = NULL;
    sleep_ms(2);
  }
  ck_assert_msg(t, "nobody took the lease again");
  ck_assert_str_eq(t->str, l.token);
  freeReplyObject(t);
  tj__remote_counters n;
  tj__remote_get_counters(r, &n);
  ck_assert_uint_ge(n.renewals, 1);
  /* The compile ends: the value, then the lease given back. */
  freeReplyObject(ask(&s, "SET %s %b", code, val->str, (size_t)val->len));
  freeReplyObject(val);
  tj__remote_lease_end(r, &l);
  herd_wait(&h);
  printf("remote: a restart while a lease was held, %d processes: %llu "
         "compiles, %llu remote hits, %llu takeovers, %llu errors; the "
         "holder renewed %llu times\n", N, (unsigned long long)h.compiles,
         (unsigned long long)h.remote_hits, (unsigned long long)h.takeovers,
         (unsigned long long)h.errors, (unsigned long long)n.renewals);
  ck_assert_int_eq(h.ok, N);
  ck_assert_uint_eq(h.compiles, 0);
  ck_assert_uint_eq(h.remote_hits, N);
  ck_assert_uint_eq(h.takeovers, 0);
  ck_assert_int_eq(keys_matching(&s, 1, TJ__REMOTE_NAMESPACE "lease:*"), 0);
  tj__remote_close(r);
  stop_server(&s);
  free(first);
  free(spec);
  free(dir);
}
END_TEST

/* A warm start from the code directory with the tier set: no SQLite,
 * no connection to the server. */
START_TEST(a_warm_start_touches_neither_sqlite_nor_the_network)
{
  char *dir = test_tmpdir();
  redis_server s;
  start_server(&s, dir);
  char *spec = spec_of(&s, 1, "");
  char *cache = test_path(dir, "warm.db");
  tj_runtime *rt = open_remote(cache, spec);
  tj_kernel *k;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_close(rt);
  redisReply *before = ask(&s, "INFO stats");
  const char *at = strstr(before->str, "total_connections_received:");
  ck_assert_ptr_nonnull(at);
  long conns = strtol(at + strlen("total_connections_received:"), NULL, 10);
  freeReplyObject(before);
  rt = open_remote(cache, spec);
  tj_stats st;
  ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
  tj_runtime_get_stats(rt, &st);
  ck_assert_uint_eq(st.cache_hits, 1);
  ck_assert_msg(!rt->cache, "the warm start opened SQLite");
  tj_runtime_close(rt);
  redisReply *after = ask(&s, "INFO stats");
  at = strstr(after->str, "total_connections_received:");
  /* one more: the ask itself */
  ck_assert_int_eq(strtol(at + strlen("total_connections_received:"), NULL,
                          10), conns + 1);
  freeReplyObject(after);
  stop_server(&s);
  free(cache);
  free(spec);
  free(dir);
}
END_TEST

/* A server that asks for a password, a database and a key prefix; one
 * on a unix socket; a wrong password turns the tier off and is never
 * printed. */
START_TEST(passwords_databases_prefixes_and_unix_sockets)
{
  /* The socket in a short directory of its own: a build directory may be
   * deeper than a socket's path can be (sun_path, 108 bytes). */
  char sockdir[] = "/tmp/tj-remote-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(sockdir));
  char *dir = test_tmpdir(), *sock = test_path(sockdir, "r.sock");
  static const char *const auth[] = {"--requirepass", "sekrit", NULL};
  const char *const unix_args[] = {"--unixsocket", sock, "--unixsocketperm",
                                   "700", NULL};
  redis_server s[2];
  start_server_with(&s[0], dir, 0, auth);
  start_server_with(&s[1], dir, 0, unix_args);
  char spec[3][300];
  snprintf(spec[0], sizeof spec[0], "redis://:sekrit@127.0.0.1:%d/3?prefix="
           "team:", s[0].port);
  snprintf(spec[1], sizeof spec[1], "unix://%s?db=2&prefix=u:", sock);
  snprintf(spec[2], sizeof spec[2], "redis://default:wrong@127.0.0.1:%d",
           s[0].port);
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "p%d.db", i);
    char *cache = test_path(dir, name);
    tj_runtime *rt = open_remote(cache, spec[i]);
    tj_kernel *k;
    tj_stats st;
    ck_assert_int_eq(tj_kernel_get(rt, "add_i32", &k), TJ_OK);
    tj_runtime_get_stats(rt, &st);
    ck_assert_msg(!strstr(tj_errmsg(rt), "sekrit") &&
                  !strstr(tj_errmsg(rt), "wrong"), "%s", tj_errmsg(rt));
    if (i < 2) {
      ck_assert_msg(!tj_errmsg(rt)[0], "%s", tj_errmsg(rt));
      ck_assert_uint_eq(st.remote_errors + st.remote_timeouts, 0);
      ck_assert_uint_ge(st.remote_misses, 1);
    } else {
      ck_assert_uint_eq(st.remote_errors, 1);
    }
    tj_runtime_close(rt);
    free(cache);
  }
  /* Each value is in the database and under the prefix asked for. */
  redisContext *c = admin(s[0].port);
  freeReplyObject(redisCommand(c, "AUTH sekrit"));
  freeReplyObject(redisCommand(c, "SELECT 3"));
  redisReply *r = redisCommand(c, "KEYS team:tokitai-jit:v1:code:*");
  ck_assert_uint_eq(r->elements, 1);
  freeReplyObject(r);
  redisFree(c);
  c = admin(s[1].port);
  freeReplyObject(redisCommand(c, "SELECT 2"));
  r = redisCommand(c, "KEYS u:tokitai-jit:v1:code:*");
  ck_assert_uint_eq(r->elements, 1);
  freeReplyObject(r);
  redisFree(c);
  for (int i = 0; i < 2; i++)
    stop_server(&s[i]);
  unlink(sock);
  rmdir(sockdir);
  free(sock);
  free(dir);
}
END_TEST

int main(void)
{
  if (!have_redis_server()) {
    printf("redis-server is not installed: skipping check_remote\n");
    return 77;
  }
  /* A fault turns the tier off for longer than a case runs, unless the
   * case asks for a shorter backoff. */
  setenv("TOKITAI_JIT_REMOTE_BACKOFF_MS", "600000", 1);
  Suite *s = suite_create("remote");
  TCase *tc = test_case(s, "values", 60);
  tcase_add_test(tc, rendezvous_hashing_moves_few_keys);
  tcase_add_test(tc, specs_that_do_not_parse_are_refused);
  tcase_add_test(tc, a_value_with_any_byte_changed_is_refused);
  tc = test_case(s, "servers", 240);
  tcase_add_test(tc, a_cluster_compiles_each_key_once);
  tcase_add_test(tc, a_cluster_compiles_each_file_once);
  tcase_add_test(tc, processes_sharing_a_cache_compile_each_key_once);
  tcase_add_test(tc, a_server_killed_mid_run_costs_only_compiles);
  tcase_add_test(tc, a_dead_shard_turns_off_its_keys_only);
  tcase_add_test(tc, a_server_that_never_answers_is_given_up);
  tcase_add_test(tc, a_tampered_value_is_never_loaded);
  tcase_add_test(tc, a_read_only_client_writes_nothing);
  tcase_add_test(tc, passwords_databases_prefixes_and_unix_sockets);
  tc = test_case(s, "stalls", 120);
  tcase_add_test(tc, a_server_stopped_while_a_lease_is_held_costs_one_timeout);
  tc = test_case(s, "faults", 120);
  tcase_add_test(tc, slow_or_odd_servers_cost_one_deadline);
  tcase_add_test(tc, a_lease_shorter_than_a_compile_is_renewed);
  tcase_add_test(tc, a_damaged_value_is_replaced_by_one_compile);
  tcase_add_test(tc, one_waiter_takes_over_a_stuck_lease);
  tcase_add_test(tc, one_waiter_takes_over_a_stuck_local_lease);
  tcase_add_test(tc, an_idle_connection_the_server_closed_costs_no_fault);
  tcase_add_test(tc, the_tier_comes_back_after_a_stall_and_a_restart);
  tcase_add_test(tc, sharing_resumes_after_a_stall_mid_herd);
  tcase_add_test(tc, a_warm_start_touches_neither_sqlite_nor_the_network);
  tc = test_case(s, "ridden", 120);
  tcase_add_test(tc, a_stall_mid_compile_costs_at_most_one_compile_more);
  tcase_add_test(tc, a_restart_mid_compile_costs_no_compile_more);
  tcase_add_test(tc, a_holder_gone_without_its_value_is_followed_by_one_compile);
  return run_suite(s);
}

#else

int main(void)
{
  printf("built without hiredis: skipping check_remote\n");
  return 77;
}

#endif
