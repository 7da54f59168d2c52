"""One module per `sessionizer` subcommand, each with `add_parser(subparsers, common)`."""

__all__: list[str] = []
