/* Stand-in for the glib.h of Frida's CModule runtime: only the types and macros the agent's C uses, declared as
   CModule code sees them on x86-64 Linux. gcc builds fastpath.c against it (instrument/native_build.py), and
   tests/instrument/test_tracer_c.py compiles every C file of the agent with it. */

#ifndef STROBE_STUB_GLIB_H
#define STROBE_STUB_GLIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef char gchar;
typedef int gint;
typedef unsigned int guint;
typedef long glong;
typedef unsigned long gulong;
typedef double gdouble;
typedef void * gpointer;
typedef const void * gconstpointer;
typedef gint gboolean;
typedef int32_t gint32;
typedef uint32_t guint32;
typedef uint16_t guint16;
typedef uint8_t guint8;
typedef int64_t gint64;
typedef uint64_t guint64;
typedef size_t gsize;
typedef ssize_t gssize;
typedef void (* GCallback) (void);

#define MIN(a, b) (((a) < (b)) ? (a) : (b))
#define G_STRUCT_OFFSET(struct_type, member) ((glong) offsetof (struct_type, member))
#define GPOINTER_TO_SIZE(p) ((gsize) (p))
#define GSIZE_TO_POINTER(s) ((gpointer) (gsize) (s))
#define GPOINTER_TO_UINT(p) ((guint) (gulong) (p))

gint g_atomic_int_add (volatile gint * atomic, gint val);

#endif
