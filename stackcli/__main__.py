import sys

from stackcli.cli import main

sys.exit(main())
