"""`python -m lodex.api.cli`: the `lodex` command."""

from lodex.api.cli.main import main

main()
