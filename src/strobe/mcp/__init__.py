"""The MCP face of the daemon: tool schemas, descriptions and handlers. No SQL, no Frida calls here."""
