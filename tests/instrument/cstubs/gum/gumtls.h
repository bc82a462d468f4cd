/* Stand-in for gum/gumtls.h as Frida's CModule runtime provides it, written for
   tests/instrument/test_tracer_c.py: the thread-local slot API tracer.c uses. */

#ifndef STROBE_STUB_GUM_TLS_H
#define STROBE_STUB_GUM_TLS_H

#include <glib.h>

typedef gsize GumTlsKey;

GumTlsKey gum_tls_key_new (void);
void gum_tls_key_free (GumTlsKey key);
gpointer gum_tls_key_get_value (GumTlsKey key);
void gum_tls_key_set_value (GumTlsKey key, gpointer value);

#endif
