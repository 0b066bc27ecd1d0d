/* term: terminal set-up, restore and signals (see term.h).
 *
 * The signal state is file-static: a process has one terminal and one set
 * of signal handlers, and handlers can reach nothing else. */
#include "term.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static int sig_pipe[2] = {-1, -1};
static struct termios saved_tio;
static int saved_tio_ok;
static volatile sig_atomic_t term_live;

/* Leaves the alternate screen, turns off mouse reporting and bracketed
 * paste and shows the cursor: the sequences a crashed curses app leaves on. */
static const char reset_seq[] =
    "\033[?2004l\033[?1000l\033[?1002l\033[?1006l\033[?25h\033[?1049l\033[0m";

static void on_quit_signal(int sig)
{
    int e = errno;
    unsigned char b = (unsigned char)sig;
    if (sig_pipe[1] >= 0) (void)!write(sig_pipe[1], &b, 1);
    errno = e;
}

static void on_crash(int sig)
{
    if (term_live) {
        if (saved_tio_ok) tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
        (void)!write(STDOUT_FILENO, reset_seq, sizeof reset_seq - 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static int install_signals(void)
{
    if (sig_pipe[0] < 0) {
        if (pipe(sig_pipe) < 0) return -1;
        for (int i = 0; i < 2; i++) {
            fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
            fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_quit_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int ui_term_signal_fd(void)
{
    return sig_pipe[0];
}

int ui_term_signal(void)
{
    unsigned char b;
    if (sig_pipe[0] >= 0 && read(sig_pipe[0], &b, 1) == 1) return b;
    return 0;
}

static void set_modes(struct ui_term *t, bool no_color)
{
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    t->color = !no_color && has_colors();
    if (t->color) {
        start_color();
        use_default_colors();
    }
    mousemask(BUTTON4_PRESSED | BUTTON5_PRESSED, NULL); /* the wheel scrolls the chat */
    mouseinterval(0);
    if (!t->headless) {
        fputs("\033[?2004h", t->out); /* bracketed paste */
        fflush(t->out);
    }
    getmaxyx(stdscr, t->rows, t->cols);
}

static int open_headless(struct ui_term *t, int rows, int cols, char *err, size_t errlen)
{
    int p[2];
    if (pipe(p) < 0) {
        snprintf(err, errlen, "headless: pipe: %s", strerror(errno));
        return -1;
    }
    t->in = fdopen(p[0], "r");
    t->out = fopen("/dev/null", "w");
    t->key_wr = p[1];
    t->in_fd = p[0];
    if (!t->in || !t->out) {
        snprintf(err, errlen, "headless: cannot open streams");
        return -1;
    }
    char lines[16], columns[16];
    snprintf(lines, sizeof lines, "%d", rows);
    snprintf(columns, sizeof columns, "%d", cols);
    setenv("LINES", lines, 1);
    setenv("COLUMNS", columns, 1);
    use_env(TRUE);
    t->scr = newterm("xterm-256color", t->out, t->in);
    if (!t->scr) {
        snprintf(err, errlen, "headless: newterm(xterm-256color) failed (terminfo missing?)");
        return -1;
    }
    return 0;
}

int ui_term_open(struct ui_term *t, bool headless, int rows, int cols, bool no_color, char *err,
                 size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->key_wr = -1;
    t->headless = headless;
    if (install_signals() < 0) {
        snprintf(err, errlen, "signal pipe: %s", strerror(errno));
        return -1;
    }
    if (headless) {
        if (open_headless(t, rows, cols, err, errlen) < 0) return -1;
    } else {
        if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
            snprintf(err, errlen,
                     "needs a terminal: stdin and stdout are not both ttys (tests: --headless-frames)");
            return -1;
        }
        if (tcgetattr(STDIN_FILENO, &saved_tio) == 0) saved_tio_ok = 1;
        t->out = stdout;
        t->in = stdin;
        t->in_fd = STDIN_FILENO;
        const char *term = getenv("TERM");
        t->scr = newterm(NULL, stdout, stdin);
        if (!t->scr) {
            snprintf(err, errlen, "cannot use terminal type '%s' (TERM)", term ? term : "(unset)");
            return -1;
        }
    }
    set_term(t->scr);
    term_live = !headless;
    t->active = true;
    set_modes(t, no_color);
    return 0;
}

void ui_term_close(struct ui_term *t)
{
    if (!t->active) return;
    t->active = false;
    if (!t->headless) {
        fputs("\033[?2004l", t->out);
        fflush(t->out);
    }
    endwin();
    term_live = 0;
    delscreen(t->scr);
    t->scr = NULL;
    if (t->headless) {
        fclose(t->in);
        fclose(t->out);
        if (t->key_wr >= 0) close(t->key_wr);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
}

void ui_term_resize(struct ui_term *t)
{
    getmaxyx(stdscr, t->rows, t->cols);
}
