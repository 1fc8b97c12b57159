"""llmctl's version: one definition, read by pyproject.toml ([tool.hatch.version])
and by the modules that print or write it, without importing the package facade."""

__version__ = "0.1.0"
