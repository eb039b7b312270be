"""``python -m semvecctl`` and the ``semvecctl`` console script."""

from __future__ import annotations


def main() -> None:
    from semvecctl.app import run

    run()


if __name__ == "__main__":
    main()
