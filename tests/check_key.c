/* check_key.c: the cache key changes with every input and only with them. */
#include "testutil.h"
#include "internal.h"

static const char *base_source = "extern \"C\" __global__ void k(int *p) { *p = 1; }";

static tj__key_input base_input(void)
{
  tj__key_input in = {.source = base_source,
                      .source_len = strlen(base_source), .entry = "k",
                      .options = "-DX=1", .arch = "gfx90a:xnack-",
                      .platform = "amd", .compiler = "hiprtc 9.0, comgr 2.4"};
  return in;
}

static void key_of(const tj__key_input *in, char out[TJ__KEY_HEX])
{
  tj__key_compute(in, out);
}

START_TEST(key_is_32_lowercase_hex_and_stable)
{
  tj__key_input in = base_input();
  char a[TJ__KEY_HEX], b[TJ__KEY_HEX];
  key_of(&in, a);
  key_of(&in, b);
  ck_assert_str_eq(a, b);
  ck_assert_uint_eq(strlen(a), 32);
  for (int i = 0; i < 32; i++)
    ck_assert_msg(strchr("0123456789abcdef", a[i]), "char %d of %s", i, a);
}
END_TEST

/* Each field changed on its own must change the key. */
START_TEST(key_changes_with_each_input)
{
  static const char other_source[] =
      "extern \"C\" __global__ void k(int *p) { *p = 2; }";
  char want[TJ__KEY_HEX], got[TJ__KEY_HEX];
  tj__key_input in = base_input();
  key_of(&in, want);
  for (int field = 0; field < 6; field++) {
    in = base_input();
    switch (field) {
    case 0: in.source = other_source; in.source_len = strlen(other_source); break;
    case 1: in.entry = "k2"; break;
    case 2: in.options = "-DX=2"; break;
    case 3: in.arch = "gfx90a:xnack+"; break;
    case 4: in.platform = "nvidia"; break;
    case 5: in.compiler = "hiprtc 9.0, comgr 2.5"; break;
    }
    key_of(&in, got);
    ck_assert_msg(strcmp(want, got) != 0, "field %d did not change the key", field);
  }
}
END_TEST

/* Length prefixes: moving bytes from one field to the next changes the key. */
START_TEST(key_fields_cannot_run_together)
{
  char a[TJ__KEY_HEX], b[TJ__KEY_HEX];
  tj__key_input in = base_input();
  in.entry = "ab";
  in.options = "c";
  key_of(&in, a);
  in.entry = "a";
  in.options = "bc";
  key_of(&in, b);
  ck_assert_str_ne(a, b);
  /* A source that differs only past an embedded NUL still differs. */
  static const char s1[] = "x\0a", s2[] = "x\0b";
  in = base_input();
  in.source = s1; in.source_len = 3;
  key_of(&in, a);
  in.source = s2;
  key_of(&in, b);
  ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(encoding_is_length_prefixed)
{
  tj__key_input in = {.source = "src", .source_len = 3, .entry = "e",
                      .options = "", .arch = "a", .platform = "p",
                      .compiler = "c"};
  size_t n = tj__key_encode(&in, NULL, 0);
  /* version tag + 6 fields, each with an 8-byte length */
  size_t want = 7 * 8 + strlen("tokitai-jit key v3") + 3 + 1 + 0 + 1 + 1 + 1;
  ck_assert_uint_eq(n, want);
  unsigned char buf[256];
  ck_assert_uint_eq(tj__key_encode(&in, buf, sizeof buf), want);
  size_t src_at = 8 + strlen("tokitai-jit key v3");
  ck_assert_uint_eq(buf[src_at], 3);
  for (int i = 1; i < 8; i++)
    ck_assert_uint_eq(buf[src_at + i], 0);
  ck_assert(memcmp(buf + src_at + 8, "src", 3) == 0);
  /* A short buffer is never overrun, and the length is still reported. */
  unsigned char small[10];
  memset(small, 0xee, sizeof small);
  ck_assert_uint_eq(tj__key_encode(&in, small, 4), want);
  for (int i = 4; i < 10; i++)
    ck_assert_uint_eq(small[i], 0xee);
}
END_TEST

START_TEST(options_are_normalised)
{
  struct { const char *in, *out; } cases[] = {
    {NULL, ""}, {"", ""}, {"   \t\n", ""}, {"-O3", "-O3"},
    {"  -O3\t -DX=1  ", "-O3 -DX=1"}, {"-a\n\n-b", "-a -b"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = tj__options_normalise(cases[i].in);
    ck_assert_str_eq(got, cases[i].out);
    free(got);
  }
  /* Options that differ only in spacing give the same key. */
  tj__key_input in = base_input();
  char a[TJ__KEY_HEX], b[TJ__KEY_HEX];
  char *n1 = tj__options_normalise("-DX=1  -O2"), *n2 = tj__options_normalise(" -DX=1 -O2 ");
  in.options = n1;
  key_of(&in, a);
  in.options = n2;
  key_of(&in, b);
  ck_assert_str_eq(a, b);
  free(n1);
  free(n2);
}
END_TEST

START_TEST(blob_hash_is_xxh3_128)
{
  char h[TJ__KEY_HEX];
  /* XXH3-128 of the empty input, from the xxHash reference. */
  tj__hash_hex("", 0, h);
  ck_assert_str_eq(h, "99aa06d3014798d86001c324468d497f");
}
END_TEST

int main(void)
{
  Suite *s = suite_create("key");
  TCase *tc = test_case(s, "key", 60);
  tcase_add_test(tc, key_is_32_lowercase_hex_and_stable);
  tcase_add_test(tc, key_changes_with_each_input);
  tcase_add_test(tc, key_fields_cannot_run_together);
  tcase_add_test(tc, encoding_is_length_prefixed);
  tcase_add_test(tc, options_are_normalised);
  tcase_add_test(tc, blob_hash_is_xxh3_128);
  return run_suite(s);
}
