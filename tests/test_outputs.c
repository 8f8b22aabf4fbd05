/* test_outputs.c - gr_output, the one way the library writes a file: the
 * target is replaced whole at the commit and never before, a link is
 * followed and stays a link, a dangling link or a file that is not regular
 * is refused without being opened, a write error fails with the path and
 * the errno text and leaves the old file; its users gr_session_save and
 * gr_format_in_place; and gr_program_file, the files a program reads
 * (a text() folder's files too). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "graphrun.h"
#include "gr_test.h"

static char dir[64];

/* dir/name, in one of four rotating buffers. */
static const char *tp(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* The file's text (at most 255 bytes), in a static buffer. */
static const char *get(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Names in dir with ".tmp." in them. */
static int temps(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static mode_t kind(const char *path)
{
    struct stat sb;
    assert_int_equal(lstat(path, &sb), 0);
    return sb.st_mode & S_IFMT;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/gr_outputs_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[2 * sizeof dir + 32];
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s; rm -rf %s", dir, dir);
    return system(cmd);
}

/* Writes text to path through a gr_output and commits. */
static gr_code write_out(const char *path, const char *text, gr_status *st)
{
    gr_output *o;
    gr_code c = gr_output_open(path, &o, st);
    if (c != GR_OK) return c;
    fputs(text, gr_output_file(o));
    return gr_output_commit(o, st);
}

static void test_output_replaces_the_file_whole_at_the_commit(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    put(tp("a"), "old");
    gr_output *o;
    assert_gr_ok(gr_output_open(tp("a"), &o, st), st);
    fputs("new", gr_output_file(o));
    assert_gr_ok(gr_output_flush(o, st), st);
    assert_string_equal(get(tp("a")), "old");
    assert_int_equal(temps(), 1);
    assert_gr_ok(gr_output_commit(o, st), st);
    assert_string_equal(get(tp("a")), "new");
    assert_int_equal(temps(), 0);
    assert_gr_ok(gr_output_open(tp("a"), &o, st), st);
    fputs("discarded", gr_output_file(o));
    gr_output_discard(o);
    assert_string_equal(get(tp("a")), "new");
    assert_int_equal(temps(), 0);
    gr_status_free(st);
}

static void test_output_keeps_the_mode_and_a_new_file_gets_the_umask(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    struct stat sb;
    put(tp("m"), "old");
    assert_int_equal(chmod(tp("m"), 0640), 0);
    assert_gr_ok(write_out(tp("m"), "new", st), st);
    assert_int_equal(stat(tp("m"), &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);
    mode_t old = umask(027);
    assert_gr_ok(write_out(tp("fresh"), "new", st), st);
    umask(old);
    assert_int_equal(stat(tp("fresh"), &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0640);
    gr_status_free(st);
}

static void test_output_follows_a_link_which_stays_a_link(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    put(tp("target"), "old");
    assert_int_equal(symlink("target", tp("link")), 0);
    assert_int_equal(symlink("link", tp("link2")), 0); /* a chain */
    assert_gr_ok(write_out(tp("link2"), "new", st), st);
    assert_int_equal(kind(tp("link")), S_IFLNK);
    assert_int_equal(kind(tp("link2")), S_IFLNK);
    assert_int_equal(kind(tp("target")), S_IFREG);
    assert_string_equal(get(tp("target")), "new");
    assert_int_equal(temps(), 0);
    gr_status_free(st);
}

/* path is refused with a message naming it and containing what; it is
 * still of kind k after. */
static void check_refused(const char *path, const char *what, mode_t k)
{
    gr_status *st = gr_status_new();
    gr_output *o = (gr_output *)st; /* must become NULL */
    assert_int_equal(gr_output_open(path, &o, st), GR_ERR_IO);
    assert_null(o);
    const char *msg = gr_status_message(st);
    if (!strstr(msg, path) || !strstr(msg, what)) fail_msg("%s: %s", path, msg);
    assert_int_equal(kind(path), k);
    gr_status_free(st);
}

static void test_output_refuses_what_is_not_a_regular_file(void **state)
{
    (void)state;
    assert_int_equal(mkfifo(tp("fifo"), 0644), 0);
    check_refused(tp("fifo"), "not a regular file (a FIFO)", S_IFIFO); /* never opened */
    assert_int_equal(mkdir(tp("dir"), 0755), 0);
    check_refused(tp("dir"), "not a regular file (a directory)", S_IFDIR);
    assert_int_equal(symlink("fifo", tp("to_fifo")), 0);
    check_refused(tp("to_fifo"), "not a regular file (a FIFO)", S_IFLNK);
    assert_int_equal(symlink("nowhere", tp("dangling")), 0);
    check_refused(tp("dangling"), "a symbolic link to nothing", S_IFLNK);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", tp("sock"));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    check_refused(tp("sock"), "not a regular file (a socket)", S_IFSOCK);
    close(fd);
    if (mknod(tp("null"), S_IFCHR | 0666, makedev(1, 3)) == 0) /* root only */
        check_refused(tp("null"), "not a regular file (a character device)", S_IFCHR);
    put(tp("ro"), "old");
    assert_int_equal(chmod(tp("ro"), 0444), 0);
    check_refused(tp("ro"), "read-only", S_IFREG);
    assert_string_equal(get(tp("ro")), "old");
    assert_int_equal(temps(), 0);
}

/* Past RLIMIT_FSIZE a write fails with EFBIG (SIGXFSZ ignored): a full
 * disk part-way, without one. */
static void test_output_write_error_fails_and_keeps_the_old_file(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    put(tp("big"), "old");
    gr_output *o;
    assert_gr_ok(gr_output_open(tp("big"), &o, st), st);
    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit small = {4096, old.rlim_max}; /* the soft limit only: it can be raised again */
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    for (int i = 0; i < 1000; i++) fputs("0123456789", gr_output_file(o));
    gr_code flushed = gr_output_flush(o, st);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", gr_status_message(st));
    gr_code committed = gr_output_commit(o, st);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, SIG_DFL);
    assert_int_equal(flushed, GR_ERR_IO);
    assert_non_null(strstr(msg, tp("big")));
    assert_non_null(strstr(msg, strerror(EFBIG)));
    assert_int_equal(committed, GR_ERR_IO);
    assert_string_equal(get(tp("big")), "old");
    assert_int_equal(temps(), 0);
    gr_status_free(st);
}

static void test_session_save_follows_links_and_refuses_a_fifo(void **state)
{
    (void)state;
    static const char src[] = "var w = ones([2])\nloss = sum(w * w)\n"
                              "train = sgd(0.1).minimize(loss)\n";
    gr_status *st = gr_status_new();
    gr_program *p;
    gr_session *s;
    assert_gr_ok(gr_compile_string("s.graph", src, sizeof src - 1, NULL, &p, st), st);
    assert_gr_ok(gr_session_new(p, NULL, &s, st), st);
    assert_gr_ok(gr_run(s, "train", NULL, 0, NULL, 0, st), st);
    put(tp("ck"), "old");
    assert_int_equal(symlink("ck", tp("ck.link")), 0);
    assert_gr_ok(gr_session_save(s, tp("ck.link"), st), st);
    assert_int_equal(kind(tp("ck.link")), S_IFLNK);
    assert_gr_ok(gr_session_restore(s, tp("ck"), NULL, st), st);
    assert_int_equal(gr_session_step(s), 1);
    assert_int_equal(mkfifo(tp("ck.fifo"), 0644), 0);
    assert_int_equal(gr_session_save(s, tp("ck.fifo"), st), GR_ERR_IO);
    assert_non_null(strstr(gr_status_message(st), "not a regular file"));
    assert_int_equal(gr_session_restore(s, tp("ck.fifo"), NULL, st), GR_ERR_IO); /* no block */
    assert_int_equal(kind(tp("ck.fifo")), S_IFIFO);
    assert_int_equal(temps(), 0);
    gr_session_free(s);
    gr_program_free(p);
    gr_status_free(st);
}

static void test_format_in_place_keeps_a_link_and_refuses_a_fifo(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    int changed = 0;
    put(tp("ugly.graph"), "param lr    = 0.1\nloss  = lr\n");
    assert_int_equal(symlink("ugly.graph", tp("fmt.link")), 0);
    assert_gr_ok(gr_format_in_place(tp("fmt.link"), &changed, st), st);
    assert_int_equal(changed, 1);
    assert_int_equal(kind(tp("fmt.link")), S_IFLNK);
    assert_string_equal(get(tp("ugly.graph")), "param lr = 0.1\nloss = lr\n");
    assert_int_equal(mkfifo(tp("f.graph"), 0644), 0);
    alarm(60); /* reading the FIFO would block for ever */
    assert_int_equal(gr_format_in_place(tp("f.graph"), &changed, st), GR_ERR_IO);
    alarm(0);
    assert_non_null(strstr(gr_status_message(st), "not a regular file (a FIFO)"));
    assert_int_equal(changed, 0);
    assert_int_equal(temps(), 0);
    gr_status_free(st);
}

static void test_program_lists_the_files_it_reads(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p;
    char data[300], text[512];
    put(tp("d.csv"), "a,b,label\n1,2,0\n3,4,1\n");
    snprintf(data, sizeof data, "%s", tp("d.csv"));
    snprintf(text, sizeof text,
             "data a = csv(\"d.csv\", batch=2)\ndata b = csv(\"%s\", batch=1)\n"
             "loss = sum(a.x) + sum(b.x)\n",
             data);
    put(tp("g.graph"), text);
    assert_gr_ok(gr_compile_file(tp("g.graph"), NULL, &p, st), st);
    assert_int_equal(gr_program_file_count(p), 2); /* the same data file once */
    assert_string_equal(gr_program_file(p, 0), tp("g.graph"));
    assert_string_equal(gr_program_file(p, 1), data);
    assert_null(gr_program_file(p, 2));
    assert_null(gr_program_file(p, -1));
    gr_program_free(p);
    assert_gr_ok(gr_compile_string(tp("g.graph"), text, strlen(text), NULL, &p, st), st);
    assert_int_equal(gr_program_file_count(p), 1); /* no .graph file was read */
    assert_string_equal(gr_program_file(p, 0), data);
    gr_program_free(p);
    assert_int_equal(gr_program_file_count(NULL), 0);
    gr_status_free(st);
}

/* A folder that text() reads is listed, then each file in it that it
 * reads (not hidden ones or NAME.dat), so a tool can tell that --log
 * corpus/a.txt overwrites training data. */
static void test_program_lists_the_files_of_a_text_folder(void **state)
{
    (void)state;
    gr_status *st = gr_status_new();
    gr_program *p;
    char corpus[300];
    snprintf(corpus, sizeof corpus, "%s", tp("corpus"));
    assert_int_equal(mkdir(corpus, 0777), 0);
    put(tp("corpus/b.txt"), "more text\n");
    put(tp("corpus/a.txt"), "some text to read\n");
    put(tp("corpus/a.dat"), "fortune's index");
    put(tp("corpus/.hidden"), "not read");
    const char *text =
        "data d = text(\"corpus\", block=2, batch=1)\nloss = sum(cast(d.x, dtype=\"f32\"))\n";
    put(tp("t.graph"), text);
    assert_gr_ok(gr_compile_file(tp("t.graph"), NULL, &p, st), st);
    assert_int_equal(gr_program_file_count(p), 4);
    assert_string_equal(gr_program_file(p, 0), tp("t.graph"));
    assert_string_equal(gr_program_file(p, 1), corpus);
    assert_string_equal(gr_program_file(p, 2), tp("corpus/a.txt"));
    assert_string_equal(gr_program_file(p, 3), tp("corpus/b.txt"));
    gr_program_free(p);
    gr_status_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_replaces_the_file_whole_at_the_commit),
        cmocka_unit_test(test_output_keeps_the_mode_and_a_new_file_gets_the_umask),
        cmocka_unit_test(test_output_follows_a_link_which_stays_a_link),
        cmocka_unit_test(test_output_refuses_what_is_not_a_regular_file),
        cmocka_unit_test(test_output_write_error_fails_and_keeps_the_old_file),
        cmocka_unit_test(test_session_save_follows_links_and_refuses_a_fifo),
        cmocka_unit_test(test_format_in_place_keeps_a_link_and_refuses_a_fifo),
        cmocka_unit_test(test_program_lists_the_files_it_reads),
        cmocka_unit_test(test_program_lists_the_files_of_a_text_folder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
