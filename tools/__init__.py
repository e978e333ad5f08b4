"""Command-line tools: tessera-cc, tessera-opt, tessera-objdump, tessera-config."""
