/*===- StandaloneShims.c - What liblethe-c.so's static archives lack ------===*\
|*                                                                            *|
|* Debian's static COIN-OR and bzip2 archives, linked into liblethe-c.so, are *|
|* built as position-dependent code: they read glibc's stdin, stdout and      *|
|* stderr PC-relatively, which a shared library cannot resolve to glibc.      *|
|* The library defines the three (hidden, so its references bind to them)     *|
|* and copies glibc's streams into them when it is loaded. It also defines    *|
|* LAPACK's error handler, which would otherwise bring in the Fortran         *|
|* runtime (itself not position independent) to print and stop the process.  *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#include <dlfcn.h>
#include <stddef.h>

/* <stdio.h> is not included: it declares the streams this file defines. */
typedef struct _IO_FILE FILE;
extern int fprintf(FILE *stream, const char *format, ...);

__attribute__((visibility("hidden"))) FILE *letheStdin __asm__("stdin");
__attribute__((visibility("hidden"))) FILE *letheStdout __asm__("stdout");
__attribute__((visibility("hidden"))) FILE *letheStderr __asm__("stderr");

static FILE *glibcStream(const char *name) {
  FILE **stream = (FILE **)dlsym(RTLD_DEFAULT, name);
  return stream ? *stream : NULL;
}

/* Before any other constructor of the library. */
__attribute__((constructor(101))) static void letheInitStreams(void) {
  letheStdin = glibcStream("stdin");
  letheStdout = glibcStream("stdout");
  letheStderr = glibcStream("stderr");
}

/* LAPACK's XERBLA: reports an illegal argument. Lethe's CBC calls pass none;
   if one did, the solve goes on (the reference XERBLA would stop the
   process). */
__attribute__((visibility("hidden"))) void xerbla_(const char *routine,
                                                   const int *argument,
                                                   size_t routineLength) {
  if (letheStderr)
    fprintf(letheStderr, "lethe: LAPACK %.*s: argument %d is illegal\n",
            (int)routineLength, routine, *argument);
}
