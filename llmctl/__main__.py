import sys

from llmctl.cli import main

sys.exit(main())
