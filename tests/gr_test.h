/* gr_test.h - what the cmocka tests of the public API share.  Include it
 * after <cmocka.h> and "graphrun.h". */
#ifndef GR_TEST_H
#define GR_TEST_H

/* Fails the test with the call, the code and the status message. */
#define assert_gr_ok(call, st)                                                                     \
    do {                                                                                           \
        gr_code c_ = (call);                                                                       \
        if (c_ != GR_OK) fail_msg("%s -> %s: %s", #call, gr_code_name(c_), gr_status_message(st)); \
    } while (0)

#endif
