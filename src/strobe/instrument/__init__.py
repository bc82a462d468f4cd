"""Everything that talks to Frida: the agent build, the worker thread, spawning and messages."""
