"""``python -m josefk`` runs the ``josefk`` command."""

from josefk.cli.main import main

main()
