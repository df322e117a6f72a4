"""``python -m bara.cli``: the `bara` command."""

from bara.cli import main

if __name__ == "__main__":
    main()
