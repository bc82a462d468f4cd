/* The filter of output capture (output.ts): Interceptor listeners on libc's write and writev, run by a CModule,
   so that a call on any fd other than 1 and 2 never enters JavaScript (a program writing to sockets and files
   pays only the Interceptor's own trampolines). For fd 1 or 2, on leave, on_output (a JavaScript
   NativeCallback) gets each run of bytes the call really wrote: its return value, nothing on an error; for
   writev, the iovecs in order up to that count. The program's own call is left as it was: its arguments and
   buffers are only read, after it returned; Frida saves and restores errno around listeners. */

#include <gum/guminterceptor.h>

typedef struct
{
  gpointer base;
  gsize length;
} IoVec; /* struct iovec */

typedef struct
{
  gint fd;
  gint count; /* writev's iovcnt */
  gconstpointer data; /* write's buffer, writev's iov */
} Call;

extern void on_output (gint fd, gconstpointer buffer, gsize length);

static gboolean
is_output (gint fd)
{
  return fd == 1 || fd == 2;
}

static gsize
written (GumInvocationContext * ic)
{
  gssize n = (gssize) gum_invocation_context_get_return_value (ic); /* ssize_t, -1 on an error */
  return n > 0 ? (gsize) n : 0;
}

/* write (int fd, const void * buf, size_t count) and writev (int fd, const struct iovec * iov, int iovcnt) */
void
write_enter (GumInvocationContext * ic)
{
  Call * call = GUM_IC_GET_INVOCATION_DATA (ic, Call);
  call->fd = (gint) (gsize) gum_invocation_context_get_nth_argument (ic, 0);
  if (!is_output (call->fd))
    return;
  call->data = gum_invocation_context_get_nth_argument (ic, 1);
  call->count = (gint) (gsize) gum_invocation_context_get_nth_argument (ic, 2);
}

void
write_leave (GumInvocationContext * ic)
{
  Call * call = GUM_IC_GET_INVOCATION_DATA (ic, Call);
  gsize n;
  if (!is_output (call->fd))
    return;
  n = written (ic);
  if (n > 0)
    on_output (call->fd, call->data, n);
}

void
writev_leave (GumInvocationContext * ic)
{
  Call * call = GUM_IC_GET_INVOCATION_DATA (ic, Call);
  const IoVec * iov;
  gsize left;
  gint i;
  if (!is_output (call->fd))
    return;
  iov = call->data;
  left = written (ic);
  for (i = 0; i < call->count && left > 0; i++)
  {
    gsize length = MIN (iov[i].length, left);
    if (length > 0)
      on_output (call->fd, iov[i].base, length);
    left -= length;
  }
}
