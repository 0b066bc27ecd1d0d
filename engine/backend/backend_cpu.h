/* backend_cpu: CPU-backend extras beyond engine/backend.h (the constructor
 * itself, backend_cpu_open, is declared there). */
#ifndef TERN_BACKEND_CPU_H
#define TERN_BACKEND_CPU_H

struct backend;

/* Sets the note get_info reports (backend_open: why the GPU was not used). */
void backend_cpu_set_note(struct backend *be, const char *note);

#endif
