"""`python -m cannaspider.sandbox`: the sandbox in the foreground (used by benchmarks)."""

from cannaspider.sandbox.cli import main

main()
