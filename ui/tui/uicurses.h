/* uicurses: the one place that includes ncursesw, with the wide-character API
 * turned on (get_wch, cchar_t) whatever the feature macros say. */
#ifndef TERN_UI_UICURSES_H
#define TERN_UI_UICURSES_H

#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <ncurses.h>

#endif
