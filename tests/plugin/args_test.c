/* The options-string helpers (pw_plugin_args_*): the grammar, every
 * refusal with the key named, defaults and bounds. */
#define _XOPEN_SOURCE 700
#include "plugin_test_util.h"

TestSuite(plugin_args, .fini = pw_test_check_leaks, .timeout = 30);

static const char* const kKnown[] = {"devices", "path", "mode", "on", NULL};

Test(plugin_args, check_accepts_known_keys_and_empty_strings) {
  PW_PT_OK(pw_plugin_args_check("", kKnown));
  PW_PT_OK(pw_plugin_args_check(NULL, kKnown));
  PW_PT_OK(pw_plugin_args_check("devices=2", kKnown));
  PW_PT_OK(pw_plugin_args_check("devices=2,path=/a/b=c,mode=,on=1", kKnown));
  PW_PT_OK(pw_plugin_args_check("", NULL));
}

Test(plugin_args, check_refuses_with_the_key_named) {
  PW_PT_EXPECT(pw_plugin_args_check("devices=2,colour=red", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "options 'devices=2,colour=red'", "unknown key 'colour'",
               "known keys: devices, path, mode, on");
  PW_PT_EXPECT(pw_plugin_args_check("x=1", NULL), PW_STATUS_INVALID_ARGUMENT,
               "unknown key 'x' (known keys: none)");
  PW_PT_EXPECT(pw_plugin_args_check("devices=2,mode=a,devices=3", kKnown),
               PW_STATUS_INVALID_ARGUMENT, "key 'devices' is given twice");
  PW_PT_EXPECT(pw_plugin_args_check("devices", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "entry 'devices' is not key=value");
  PW_PT_EXPECT(pw_plugin_args_check("devices=1,", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "entry '' is not key=value");
  PW_PT_EXPECT(pw_plugin_args_check("devices=1,,on=1", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "entry '' is not key=value");
  PW_PT_EXPECT(pw_plugin_args_check("Devices=1", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "key 'Devices' is not [a-z0-9_]+");
  PW_PT_EXPECT(pw_plugin_args_check("devices =1", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "key 'devices ' is not");
  PW_PT_EXPECT(pw_plugin_args_check("=1", kKnown), PW_STATUS_INVALID_ARGUMENT,
               "key '' is not");
}

Test(plugin_args, u64_reads_decimal_within_bounds) {
  uint64_t v = 0;
  PW_PT_OK(pw_plugin_args_u64("path=x", "devices", 8, 100, &v));
  cr_assert_eq(v, 8, "absent: the default");
  PW_PT_OK(pw_plugin_args_u64("path=x,devices=42", "devices", 8, 100, &v));
  cr_assert_eq(v, 42);
  PW_PT_OK(pw_plugin_args_u64("devices=18446744073709551615", "devices", 0, UINT64_MAX, &v));
  cr_assert_eq(v, UINT64_MAX);
  PW_PT_OK(pw_plugin_args_u64("devices=000", "devices", 5, 10, &v));
  cr_assert_eq(v, 0);
  PW_PT_EXPECT(pw_plugin_args_u64("devices=101", "devices", 8, 100, &v),
               PW_STATUS_INVALID_ARGUMENT, "option devices=101 is above its maximum 100");
  static const char* const bad[] = {"devices=-1",  "devices=+1", "devices=1.5", "devices=",
                                    "devices=0x10", "devices=1 ",
                                    "devices=18446744073709551616", NULL};
  for (size_t i = 0; bad[i] != NULL; ++i) {
    v = 7;
    PW_PT_EXPECT(pw_plugin_args_u64(bad[i], "devices", 8, UINT64_MAX, &v),
                 PW_STATUS_INVALID_ARGUMENT, "option devices='", "is not a decimal number");
  }
  PW_PT_EXPECT(pw_plugin_args_range("devices=0", "devices", 8, 1, 100, &v),
               PW_STATUS_INVALID_ARGUMENT, "option devices=0 is below its minimum 1");
  PW_PT_OK(pw_plugin_args_range("", "devices", 8, 1, 100, &v));
  cr_assert_eq(v, 8);
  PW_PT_EXPECT(pw_plugin_args_u64("", NULL, 0, 1, &v), PW_STATUS_INVALID_ARGUMENT, "key is NULL");
  PW_PT_EXPECT(pw_plugin_args_u64("", "devices", 0, 1, NULL), PW_STATUS_INVALID_ARGUMENT,
               "output is NULL");
}

Test(plugin_args, getters_read_the_first_entry_and_skip_malformed_ones) {
  uint64_t v = 0;
  /* A getter never reads past a malformed entry into the wrong key. */
  PW_PT_OK(pw_plugin_args_u64("devices,devices=3,devices=4", "devices", 8, 10, &v));
  cr_assert_eq(v, 3);
  PW_PT_OK(pw_plugin_args_u64("xdevices=5,devicesx=6", "devices", 8, 10, &v));
  cr_assert_eq(v, 8, "prefixes and suffixes are other keys");
}

Test(plugin_args, str_copies_the_value_or_the_default) {
  char buf[8];
  PW_PT_OK(pw_plugin_args_str("path=/a=b,mode=x", "path", "dflt", buf, sizeof(buf)));
  cr_assert_str_eq(buf, "/a=b", "everything after the first '='");
  PW_PT_OK(pw_plugin_args_str("mode=x", "path", "dflt", buf, sizeof(buf)));
  cr_assert_str_eq(buf, "dflt");
  PW_PT_OK(pw_plugin_args_str("mode=x", "path", NULL, buf, sizeof(buf)));
  cr_assert_str_eq(buf, "");
  PW_PT_OK(pw_plugin_args_str("path=", "path", "dflt", buf, sizeof(buf)));
  cr_assert_str_eq(buf, "", "given empty: empty, not the default");
  PW_PT_OK(pw_plugin_args_str("path=1234567", "path", NULL, buf, sizeof(buf)));
  cr_assert_str_eq(buf, "1234567");
  PW_PT_EXPECT(pw_plugin_args_str("path=12345678", "path", NULL, buf, sizeof(buf)),
               PW_STATUS_OUT_OF_RANGE, "option path", "8 bytes", "longer than 7 bytes");
  PW_PT_EXPECT(pw_plugin_args_str("", "path", "a long default", buf, sizeof(buf)),
               PW_STATUS_OUT_OF_RANGE, "option path");
  PW_PT_EXPECT(pw_plugin_args_str("", "path", NULL, buf, 0), PW_STATUS_INVALID_ARGUMENT,
               "no room");
}

Test(plugin_args, bool_takes_four_words) {
  bool b = false;
  static const char* const yes[] = {"on=true", "on=1", NULL};
  static const char* const no[] = {"on=false", "on=0", NULL};
  for (size_t i = 0; yes[i] != NULL; ++i) {
    b = false;
    PW_PT_OK(pw_plugin_args_bool(yes[i], "on", false, &b));
    cr_assert(b, "%s", yes[i]);
    PW_PT_OK(pw_plugin_args_bool(no[i], "on", true, &b));
    cr_assert(!b, "%s", no[i]);
  }
  PW_PT_OK(pw_plugin_args_bool("", "on", true, &b));
  cr_assert(b, "absent: the default");
  PW_PT_EXPECT(pw_plugin_args_bool("on=yes", "on", false, &b), PW_STATUS_INVALID_ARGUMENT,
               "option on='yes' is not true, false, 1 or 0");
  PW_PT_EXPECT(pw_plugin_args_bool("on=TRUE", "on", false, &b), PW_STATUS_INVALID_ARGUMENT,
               "on='TRUE'");
}

Test(plugin_args, choice_gives_the_index) {
  static const char* const modes[] = {"inline", "threaded", "manual", NULL};
  size_t i = 9;
  PW_PT_OK(pw_plugin_args_choice("mode=manual", "mode", modes, 0, &i));
  cr_assert_eq(i, 2);
  PW_PT_OK(pw_plugin_args_choice("", "mode", modes, 1, &i));
  cr_assert_eq(i, 1);
  PW_PT_EXPECT(pw_plugin_args_choice("mode=man", "mode", modes, 0, &i),
               PW_STATUS_INVALID_ARGUMENT, "option mode='man' is not one of: inline, threaded, "
               "manual");
}
