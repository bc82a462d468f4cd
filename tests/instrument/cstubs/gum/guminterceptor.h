/* Stand-in for gum/guminterceptor.h as Frida's CModule runtime provides it (x86-64), written for
   tests/instrument/test_tracer_c.py: the invocation context and CPU state tracer.c and output.c read. */

#ifndef STROBE_STUB_GUM_INTERCEPTOR_H
#define STROBE_STUB_GUM_INTERCEPTOR_H

#include <glib.h>

typedef struct {
  guint64 rip;
  guint64 r15, r14, r13, r12, r11, r10, r9, r8;
  guint64 rdi, rsi, rbp, rsp, rbx, rdx, rcx, rax;
  gpointer xmm; /* the saved xmm registers, 16 bytes each (Frida's trampoline fxsaves them) */
} GumCpuContext;

typedef struct {
  GCallback function;
  GumCpuContext * cpu_context;
  gint system_error;
  gpointer backend;
} GumInvocationContext;

gpointer gum_invocation_context_get_nth_argument (GumInvocationContext * context, guint n);
gpointer gum_invocation_context_get_return_value (GumInvocationContext * context);
guint gum_invocation_context_get_thread_id (GumInvocationContext * context);
gpointer gum_invocation_context_get_listener_function_data (GumInvocationContext * context);
gpointer gum_invocation_context_get_listener_invocation_data (GumInvocationContext * context, gsize required_size);

#define GUM_IC_GET_INVOCATION_DATA(context, data_type) \
    ((data_type *) gum_invocation_context_get_listener_invocation_data (context, sizeof (data_type)))

#endif
