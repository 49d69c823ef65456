"""What is shipped to the login node and run there as ``python3 -``.

Policy: standard library only (an import-linter contract holds it), because the login node
has nothing of ours installed; the modules' source is concatenated into one script.
"""
