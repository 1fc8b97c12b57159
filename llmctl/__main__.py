import sys

from llmctl.cli import run

sys.exit(run())
