"""Pictures of a run: a session's timeline written as a Chrome trace (Perfetto, chrome://tracing) or as one
self-contained HTML page. `export_session` is the entry point both debug_export and `strobe export` use."""
