"""The shared kernel: what every layer may import, and which imports nothing else of the project.

Errors (the exception tree's root), the `with` of what is started and stopped
(`lifecycle`), configuration and client settings, the ZooKeeper layout (`paths`)
and session helper, the wire-level watermark, input limits, the total JSON
decoder, the Kafka client choice and its settings. The import-linter contracts
in `pyproject.toml` keep it a leaf (docs/architecture.md).
"""
