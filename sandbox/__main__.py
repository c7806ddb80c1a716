"""`python -m sandbox`: the sandbox in the foreground (used by benchmarks)."""

from sandbox.cli import main

main()
